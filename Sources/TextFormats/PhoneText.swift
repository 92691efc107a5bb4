/// What address books write around a telephone number: an extension after
/// it (`+1 555 0100 x23`, `ext. 22`, `#22`, `;ext=22`, the pause `,22`)
/// and vanity letters (`1-800-FLOWERS`). Caller ID carries neither: calls
/// come from the main number, in digits.
///
/// Pure functions over caller-owned bytes.
public enum PhoneText {
    /// A phone field cut into the number and its extension.
    public struct Split {
        /// The number, without the extension and the spaces before it.
        public var number: UnsafeRawBufferPointer
        /// The extension's digits, nil when there is none.
        public var extensionDigits: UnsafeRawBufferPointer?
    }

    /// Markers that may introduce an extension, longest first so that
    /// `extension` is not read as `ext` followed by garbage.
    private static let markers: [[UInt8]] = [";ext=", "extension", "ext.", "ext", "x", "#", ",", ";", "p", "w"].map { Array($0.utf8) }

    /// Splits off an extension: a marker after the last digit of the number
    /// (and after at least one digit), then optional spaces, then 1 to 8
    /// digits and nothing else. Without one, the whole field is the number.
    public static func splitExtension(_ field: UnsafeRawBufferPointer) -> Split {
        var end = field.count
        while end > 0, field[end - 1] == 0x20 || field[end - 1] == 0x09 { end -= 1 }
        var sawDigit = false
        var i = 0
        while i < end {
            let b = field[i]
            if isDigit(b) {
                sawDigit = true
                i += 1
                continue
            }
            if sawDigit, let digitsStart = extensionDigits(field, at: i, end: end) {
                var numberEnd = i
                while numberEnd > 0, field[numberEnd - 1] == 0x20 || field[numberEnd - 1] == 0x09 { numberEnd -= 1 }
                return Split(number: UnsafeRawBufferPointer(rebasing: field[0..<numberEnd]),
                             extensionDigits: UnsafeRawBufferPointer(rebasing: field[digitsStart..<end]))
            }
            i += 1
        }
        return Split(number: field, extensionDigits: nil)
    }

    /// Where the extension's digits start when a marker starts at `i` and
    /// only digits follow it (up to `end`).
    private static func extensionDigits(_ field: UnsafeRawBufferPointer, at i: Int, end: Int) -> Int? {
        for marker in markers where i + marker.count <= end {
            var matches = true
            for k in 0..<marker.count where lowercase(field[i + k]) != marker[k] {
                matches = false
                break
            }
            guard matches else { continue }
            var j = i + marker.count
            // "x 23", "ext. 22", ",,23" (two pauses).
            while j < end, field[j] == 0x20 || field[j] == 0x2C || field[j] == 0x2E || field[j] == 0x3A { j += 1 }
            let start = j
            while j < end, isDigit(field[j]) { j += 1 }
            let count = j - start
            if j == end, count >= 1, count <= 8 { return start }
        }
        return nil
    }

    /// Whether the field is an extension with no number before it (`x23`,
    /// `ext. 22`): what a phone shows for a desk extension.
    public static func isBareExtension(_ field: UnsafeRawBufferPointer) -> Bool {
        var start = 0
        while start < field.count, field[start] == 0x20 || field[start] == 0x09 { start += 1 }
        guard start < field.count, !isDigit(field[start]), field[start] != 0x2B else { return false }
        return extensionDigits(field, at: start, end: trimmedEnd(field)) != nil
    }

    private static func trimmedEnd(_ field: UnsafeRawBufferPointer) -> Int {
        var end = field.count
        while end > 0, field[end - 1] == 0x20 || field[end - 1] == 0x09 { end -= 1 }
        return end
    }

    /// Whether the field looks like a vanity number (`1-800-FLOWERS`,
    /// `+1 (888) GO-FEDEX`): some digits (a country code or a toll-free
    /// prefix at least), a word of letters, 7 to 15 of them together, and
    /// nothing else but the usual separators. Text that merely contains
    /// letters ("unknown", a `sip:` URI, a typo like `1380013800x`) is not.
    public static func isVanity(_ field: UnsafeRawBufferPointer) -> Bool {
        var digits = 0, letters = 0
        for b in field {
            if isDigit(b) { digits += 1 } else if isLetter(b) { letters += 1 } else {
                switch b {
                case 0x20, 0x2B, 0x2D, 0x2E, 0x28, 0x29: continue  // space + - . ( )
                default: return false
                }
            }
        }
        return letters >= 3 && digits >= 3 && (7...15).contains(digits + letters)
    }

    /// The field with every letter replaced by its telephone keypad digit
    /// (ITU E.161: ABC 2, DEF 3, GHI 4, JKL 5, MNO 6, PQRS 7, TUV 8, WXYZ 9).
    public static func vanityDigits(_ field: UnsafeRawBufferPointer) -> [UInt8] {
        field.map { b in
            guard isLetter(b) else { return b }
            return keypad[Int(lowercase(b) - 0x61)]
        }
    }

    private static let keypad: [UInt8] = Array("22233344455566677778889999".utf8)

    @inline(__always) private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    @inline(__always) private static func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
    @inline(__always) private static func lowercase(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
}
