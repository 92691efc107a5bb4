/// The `feed` key (docs/FEEDS.md). Kept apart from the core keys; `ConfigParser.keys` lists
/// it after them.
extension ConfigParser {
    static let feedKeys: [ConfigKey] = [
        ConfigKey(name: "feed", syntax: "NAME URL [into=PATH] [format=csv|json|text|vcard] [compression=auto|none|gzip|zip] [members=NAME,...] [manifest=URL] [sha256=HEX] [max-size=BYTES] [timeout=SECONDS] [max-shrink=PERCENT]", repeatable: true,
                  summary: "A list published over HTTP(S) that lookupd update downloads, checks and compiles into a directory file (default into=STATE-DIRECTORY/directories/NAME.lkd). Feeds with the same into= are merged; for a number in several, the first configured feed wins.") { s, v throws(ValueError) in
            let feed = try FeedConfig.parse(v, resolve: s.resolve)
            guard !s.config.feeds.contains(where: { $0.name == feed.name }) else { throw ValueError("feed '\(feed.name)' is already defined") }
            s.config.feeds.append(feed)
        },
    ]
}
