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
    private let index: CalleeIndex

    public static let none = CalleeContacts(folder: nil, lists: [], normalizer: NumberNormalizer())

    /// `lists` are (file stem, list) pairs; a stem seen twice keeps the first.
    public init(folder: String?, lists: [(stem: String, list: ContactList)], normalizer: NumberNormalizer) {
        var kept: [Int] = []
        index = CalleeIndex(stems: lists.map(\.stem), normalizer: normalizer, kept: &kept)
        self.folder = folder
        self.lists = kept.map { lists[$0].list }
        self.stems = kept.map { lists[$0].stem }
    }

    public var isEmpty: Bool { lists.isEmpty }

    /// The list for the callee, if it has one.
    func list(for callee: UnsafeRawBufferPointer, normalizer: NumberNormalizer) -> Int? {
        index.list(for: callee, normalizer: normalizer)
    }
}
