/// A telephone number in E.164 form, held as the integer value of its digits
/// (country code first), the way CallKit's `CXCallDirectoryPhoneNumber` does.
///
/// E.164 numbers never start with 0 and have at most 15 digits, so the integer
/// is unambiguous and fits easily in 64 bits; it is also the directory's
/// search key, so comparing numbers is comparing integers.
public struct PhoneNumber: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Most digits an E.164 number may have (ITU-T E.164 §6).
    public static let maxDigits = 15

    public let value: UInt64

    /// `value` must be the digits of a valid E.164 number (1...15 digits, no leading zero).
    public init?(value: UInt64) {
        guard value > 0, value < 1_000_000_000_000_000 else { return nil }
        self.value = value
    }

    @inlinable
    init(unchecked value: UInt64) { self.value = value }

    /// Number of decimal digits.
    public var digitCount: Int { PhoneNumber.digitCount(of: value) }

    /// `+` followed by the digits, e.g. `+8613800138000`.
    public var description: String { "+" + String(value) }

    public static func < (lhs: PhoneNumber, rhs: PhoneNumber) -> Bool { lhs.value < rhs.value }

    @inlinable
    public static func digitCount(of value: UInt64) -> Int {
        var count = 1
        var rest = value / 10
        while rest > 0 { count += 1; rest /= 10 }
        return count
    }
}

/// Powers of ten up to 10^18, for prefix arithmetic on number values.
@usableFromInline
let powersOfTen: [UInt64] = {
    var table: [UInt64] = [1]
    for _ in 1...18 { table.append(table.last! * 10) }
    return table
}()

/// A number pattern covering every number that starts with the given digits
/// (written `+86170*`): `digits` holds the prefix digits, `length` how many.
public struct NumberPrefix: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let digits: UInt64
    public let length: Int

    public init?(digits: UInt64, length: Int) {
        guard length >= 1, length <= PhoneNumber.maxDigits,
              digits < powersOfTen[length], digits >= powersOfTen[length - 1] else { return nil }
        self.digits = digits
        self.length = length
    }

    /// Whether `number` starts with this prefix (a number equal to the prefix counts).
    @inlinable
    public func covers(_ number: PhoneNumber) -> Bool {
        let count = number.digitCount
        guard count >= length else { return false }
        return number.value / powersOfTen[count - length] == digits
    }

    public var description: String { "+" + String(digits) + "*" }

    public static func < (lhs: NumberPrefix, rhs: NumberPrefix) -> Bool {
        (lhs.length, lhs.digits) < (rhs.length, rhs.digits)
    }
}

/// What a directory source line names: one number, or every number under a prefix.
public enum NumberPattern: Hashable, Sendable, CustomStringConvertible {
    case exact(PhoneNumber)
    case prefix(NumberPrefix)

    public var description: String {
        switch self {
        case .exact(let number): return number.description
        case .prefix(let prefix): return prefix.description
        }
    }
}
