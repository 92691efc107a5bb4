/// Why a feed could not be downloaded, checked or installed, in an operator's words.
/// The message never starts with the feed's name: the caller adds it once.
public struct FeedError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
