import CCrypto

/// Incremental SHA-256 through OpenSSL's libcrypto (already loaded by libcurl and libzip),
/// so downloads are hashed while they stream to disk instead of being read twice.
///
/// Threading: one hasher per transfer.
final class SHA256Hasher {
    private let context: OpaquePointer

    init() {
        // Allocation fails only when memory is exhausted, which nothing here could survive.
        context = EVP_MD_CTX_new()!
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// Lowercase hex of the digest; the hasher is spent afterwards.
    func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return hexString(digest[0..<Int(length)])
    }

    static func hash(_ bytes: [UInt8]) -> String {
        let hasher = SHA256Hasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }
}

func hexString<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}
