import Directory

/// Contacts per callee (`contacts-dir`): one list per extension or number,
/// in a file named after it (`1001.vcf`, `+8613800138000.csv`), consulted
/// before the global contacts when that callee is called.
///
/// A file's stem matches the callee as the PBX writes it in the
/// Request-URI (`1001`); a stem that is a complete number under the
/// numbering plan (`+8613800138000`, `13800138000`) also matches that
/// number however the Request-URI writes it.
/// Threading: immutable, safe to share.
public struct CalleeContacts: Sendable {
    /// The folder the lists came from; nil when none is configured.
    public let folder: String?
    public let lists: [ContactList]
    /// The stem each list was read from, by list.
    public let stems: [String]
    private let byStem: [String: Int]
    private let byNumber: [UInt64: Int]

    public static let none = CalleeContacts(folder: nil, lists: [], normalizer: NumberNormalizer())

    /// `lists` are (file stem, list) pairs; a stem seen twice keeps the first.
    public init(folder: String?, lists: [(stem: String, list: ContactList)], normalizer: NumberNormalizer) {
        var byStem: [String: Int] = [:]
        var byNumber: [UInt64: Int] = [:]
        var kept: [ContactList] = []
        var stems: [String] = []
        for (stem, list) in lists where byStem[stem] == nil {
            byStem[stem] = kept.count
            if let n = normalizer.normalize(stem).number, byNumber[n.value] == nil { byNumber[n.value] = kept.count }
            kept.append(list)
            stems.append(stem)
        }
        self.folder = folder
        self.lists = kept
        self.stems = stems
        self.byStem = byStem
        self.byNumber = byNumber
    }

    public var isEmpty: Bool { lists.isEmpty }

    /// The list for the callee, if it has one.
    func list(for callee: UnsafeRawBufferPointer, normalizer: NumberNormalizer) -> Int? {
        guard !lists.isEmpty, !callee.isEmpty else { return nil }
        var user = callee
        if let semicolon = user.firstIndex(of: UInt8(ascii: ";")) { user = UnsafeRawBufferPointer(rebasing: user[..<semicolon]) }
        // Extensions and numbers fit Swift's small-string form (15 bytes):
        // no allocation for the usual keys.
        if let i = byStem[String(decoding: user, as: UTF8.self)] { return i }
        guard !byNumber.isEmpty, let n = normalizer.normalize(bytes: user).number else { return nil }
        return byNumber[n.value]
    }
}
