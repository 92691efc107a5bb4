import Addresses

/// A `label-format` template: literal text with `{label}`, `{name}` (the
/// caller's original display name) and `{attribution}` (the region and carrier
/// of the caller's number) in it.
public struct LabelFormat: Sendable, Hashable {
    public enum Part: Sendable, Hashable {
        case text(String)
        case label
        case name
        /// The region and carrier of the caller's number (`attribution = LANG`).
        case attribution
    }

    public var parts: [Part]

    public static let labelOnly = LabelFormat(parts: [.label])

    public init(parts: [Part]) { self.parts = parts }

    /// Fails on an unknown `{...}`, an unclosed brace, control characters, or
    /// a template without `{label}` (that would hide the verdict).
    public init?(_ template: String) {
        var parts: [Part] = []
        var text = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            text += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else { return nil }
            switch rest[rest.index(after: open)..<close] {
            case "label":
                if !text.isEmpty { parts.append(.text(text)); text = "" }
                parts.append(.label)
            case "name":
                if !text.isEmpty { parts.append(.text(text)); text = "" }
                parts.append(.name)
            case "attribution":
                if !text.isEmpty { parts.append(.text(text)); text = "" }
                parts.append(.attribution)
            default:
                return nil
            }
            rest = rest[rest.index(after: close)...]
        }
        text += rest
        if !text.isEmpty { parts.append(.text(text)) }
        guard parts.contains(.label), !template.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        self.parts = parts
    }
}

/// Proxy mode settings (docs/SIP.md, docs/INTEGRATION.md).
public struct ProxyConfig: Sendable, Hashable {
    /// `upstream`; required with `mode = proxy`.
    public var upstream: UpstreamAddress? = nil
    public var labelFormat: LabelFormat = .labelOnly
    /// `label-in-asserted-identity`: also put the label in the display name of
    /// every P-Asserted-Identity value forwarded.
    public var labelInAssertedIdentity = false
    /// `upstream-probe-interval`: seconds between OPTIONS probes to the upstream; 0: none.
    public var probeInterval = 0

    public init() {}
}
