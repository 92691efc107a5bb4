import TextFormats

extension ScreeningSet {
    /// A decision as the JSON object `lookupd query --json` prints and
    /// `/lookup.json` answers (lookupd(8) documents the fields): the one
    /// place that shape is written.
    public func writeJSON(_ d: Decision, input: UnsafeRawBufferPointer, context: CallContext = CallContext(), id: String? = nil,
                          to w: inout JSONWriter) {
        w.beginObject()
        if let id { w.field("id", id) }
        w.key("input")
        w.string(input)
        w.field("number", d.number?.description)
        w.field("verdict", d.verdict.rawValue)
        w.key("label")
        if let label = d.label { withLabel(label) { w.string($0) } } else { w.null() }
        w.field("source", d.source.map(sourceName))
        w.field("match", d.match?.description)
        w.field("reason", d.invalidReason?.description)
        w.field("record", d.journalRecord)
        w.field("revision", d.replicatedRevision)
        w.field("policy", d.policy?.rawValue)
        w.field("inactive", d.inactiveDirectory.map { directories[$0].name })
        w.key("allowed")
        w.bool(d.allowed)
        w.key("overridden")
        w.beginArray()
        for block in overriddenBlocks(d, context: context) {
            w.beginObject()
            w.field("source", directories[block.directory].name)
            w.field("match", block.match.description)
            w.endObject()
        }
        w.endArray()
        w.key("attribution")
        if let attribution, let number = d.number {
            attribution.withDescription(number) { text in if text.isEmpty { w.null() } else { w.string(text) } }
        } else {
            w.null()
        }
        w.endObject()
    }
}
