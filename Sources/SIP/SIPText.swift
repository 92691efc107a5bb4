/// A read-only view of bytes owned by a `SIPParser` (a piece of the current message, or text the
/// parser derived from it, such as a %-unescaped user part).
///
/// Threading and lifetime: a `SIPText` is only valid until the next `parse` call on the parser
/// that produced it, and only on the thread that owns that parser. It is deliberately not
/// `Sendable`. Copy it out (`string`, `Array(text)`) if it must outlive the packet.
public struct SIPText: RandomAccessCollection, Hashable, CustomStringConvertible {
    public let baseAddress: UnsafeRawPointer?
    public let count: Int

    @inlinable
    public init(baseAddress: UnsafeRawPointer?, count: Int) {
        self.baseAddress = count > 0 ? baseAddress : nil
        self.count = count > 0 ? count : 0
    }

    public static var empty: SIPText { SIPText(baseAddress: nil, count: 0) }

    public typealias Iterator = UnsafeRawBufferPointer.Iterator

    /// Iterates the raw bytes directly (cheaper than going through the checked subscript).
    @inlinable
    public func makeIterator() -> Iterator {
        UnsafeRawBufferPointer(start: baseAddress, count: count).makeIterator()
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { count }

    @inlinable
    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "SIPText index out of range")
        return baseAddress.unsafelyUnwrapped.load(fromByteOffset: position, as: UInt8.self)
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: baseAddress, count: count) }

    /// The bytes decoded as UTF-8 (invalid sequences become U+FFFD). Allocates when longer than
    /// 15 bytes.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    public var description: String { string }

    /// Byte-exact comparison with a Swift string's UTF-8.
    public func equals(_ other: String) -> Bool {
        var other = other
        return other.withUTF8 { memcmpEqual(bytes, UnsafeRawBufferPointer($0)) }
    }

    /// Comparison ignoring ASCII case (SIP tokens, scheme and parameter names are case-insensitive).
    public func equalsIgnoringCase(_ other: String) -> Bool {
        var other = other
        return other.withUTF8 { asciiCaseInsensitiveEqual(bytes, UnsafeRawBufferPointer($0)) }
    }

    public static func == (lhs: SIPText, rhs: SIPText) -> Bool { memcmpEqual(lhs.bytes, rhs.bytes) }

    public func hash(into hasher: inout Hasher) { hasher.combine(bytes: bytes) }

    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: baseAddress, count: count))
    }

    // Internal slicing helpers; offsets are relative to this view.
    func slice(_ from: Int, _ to: Int) -> SIPText {
        guard from < to, let base = baseAddress else { return .empty }
        return SIPText(baseAddress: base + from, count: to - from)
    }
}
