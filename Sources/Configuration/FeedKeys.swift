/// The `feed` key (docs/FEEDS.md). Kept apart from the core keys; `ConfigParser.keys` lists
/// it after them.
extension ConfigParser {
    static let feedKeys: [ConfigKey] = [
        ConfigKey(name: "feed", syntax: "NAME URL [into=PATH] [format=csv|json|text|vcard] [compression=auto|none|gzip|zip] [members=NAME,...] [manifest=URL] [sha256=HEX] [max-size=BYTES] [timeout=SECONDS] [max-shrink=PERCENT] [number-column=COLUMN] [label-column=COLUMN] [action-column=COLUMN] [action=block|identify|allow] [header=yes|no] [skip-invalid=yes|no] [vanity=yes|no]", repeatable: true,
                  summary: "A list published over HTTP(S) that lookupd update downloads, checks and compiles into a directory file (default into=STATE-DIRECTORY/directories/NAME.lkd). Feeds with the same into= are merged; for a number in several, the first configured feed wins. For a CSV list, number-column=, label-column= and action-column= name its columns (a header name, or 1 for the first), action= gives the action of rows without one, header=no says its first line is data, skip-invalid=yes leaves bad lines out (logged) and vanity=yes reads letters as keypad digits, as the lookupd compile options do.") { s, v throws(ValueError) in
            let feed = try FeedConfig.parse(v, resolve: s.resolve)
            guard !s.config.feeds.contains(where: { $0.name == feed.name }) else { throw ValueError("feed '\(feed.name)' is already defined") }
            s.config.feeds.append(feed)
        },
    ]
}
