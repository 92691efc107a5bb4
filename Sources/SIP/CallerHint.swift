import Glibc

/// A cheap guess at the caller numbers of an INVITE, before it is parsed: the `+digits` user
/// of the URI in each `From` (`f`) and `P-Asserted-Identity` header line. The worker warms the
/// directories' search paths with them for a whole receive batch at once; who the caller is
/// stays the parser's and `callerIdentity`'s decision (trusted peers, tel: first, national
/// forms), so a wrong or missing guess costs a wasted warm-up, never an answer.
///
/// Threading: a pure function of its bytes.
public enum SIPCallerHint {
    /// Calls `found` with each number guessed (at most one per header line, at most
    /// `limit` in all). Reads only up to the blank line that ends the headers.
    public static func numbers(_ message: UnsafeRawBufferPointer, limit: Int = 4, _ found: (UInt64) -> Void) {
        guard let base = message.baseAddress, message.count > 7, startsWithInvite(message) else { return }
        var count = 0
        var at = 0
        // Each pass: the line that starts after the previous line's LF.
        while count < limit {
            guard let newline = memchr(base + at, 0x0A, message.count - at) else { return }
            at = base.distance(to: UnsafeRawPointer(newline)) + 1
            guard at < message.count else { return }
            let first = message[at]
            if first == 0x0D || first == 0x0A { return }  // the blank line: the body follows
            if let value = number(inHeaderLine: message, from: at) {
                found(value)
                count += 1
            }
        }
    }

    private static func startsWithInvite(_ m: UnsafeRawBufferPointer) -> Bool {
        m[0] == 0x49 && m[1] == 0x4E && m[2] == 0x56 && m[3] == 0x49 && m[4] == 0x54 && m[5] == 0x45 && m[6] == 0x20
    }

    /// The number of a From, f or P-Asserted-Identity line starting at `start`, if its value
    /// holds ":+" followed by 1 to 15 digits that end the user part.
    private static func number(inHeaderLine m: UnsafeRawBufferPointer, from start: Int) -> UInt64? {
        var i = start
        while i < m.count, m[i] != 0x3A, m[i] != 0x20, m[i] != 0x09, m[i] != 0x0D, m[i] != 0x0A { i += 1 }
        guard isCallerHeader(m, start, i) else { return nil }
        // The value: up to the line's end; the first ":+" in it is the URI's scheme and user.
        while i + 1 < m.count, m[i] != 0x0A {
            if m[i] == 0x3A, m[i + 1] == 0x2B { return digits(m, from: i + 2) }
            i += 1
        }
        return nil
    }

    private static func isCallerHeader(_ m: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        let length = end - start
        if length == 1 { return m[start] | 0x20 == 0x66 }  // f
        let name: StaticString = length == 4 ? "from" : length == 19 ? "p-asserted-identity" : ""
        guard name.utf8CodeUnitCount == length, length > 0 else { return false }
        return name.withUTF8Buffer { expected in
            for k in 0..<length where m[start + k] | 0x20 != expected[k] { return false }
            return true
        }
    }

    private static func digits(_ m: UnsafeRawBufferPointer, from start: Int) -> UInt64? {
        var value: UInt64 = 0
        var i = start
        while i < m.count, i - start < 16, m[i] >= 0x30, m[i] <= 0x39 {
            value = value &* 10 &+ UInt64(m[i] &- 0x30)
            i += 1
        }
        let length = i - start
        guard length >= 1, length <= 15, i < m.count else { return nil }
        // The user part ends here (host, parameter, header or URI end); a visual separator
        // (tel:+86-138...) is not read: no guess rather than a part of a number.
        switch m[i] {
        case 0x40, 0x3B, 0x3E, 0x3F, 0x20, 0x0D, 0x0A, 0x2C: return value  // @ ; > ? SP CR LF ,
        default: return nil
        }
    }
}
