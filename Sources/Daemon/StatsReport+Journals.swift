extension StatsReport {
    /// What each directory's journal adds to it in the set in force: gauge
    /// families for the report, lines complete with their newline.
    func journalGauges() -> [(name: String, help: String, lines: [String])] {
        let directories = set.screening.directories
        func series(_ name: String, _ value: (Int) -> UInt64) -> [String] {
            directories.indices.map { "\(name){directory=\"\(escapeLabel(directories[$0].name))\"} \(value($0))\n" }
        }
        return [
            ("lookupd_journal_entries", "Numbers and prefix rules each directory's journal adds, changes or removes in force.",
             series("lookupd_journal_entries") { UInt64(directories[$0].overlay.count) }),
            ("lookupd_journal_sequence", "Last journal record read for each directory.",
             series("lookupd_journal_sequence") { directories[$0].overlay.lastSequence }),
            ("lookupd_journal_merged_sequence", "Last journal record each directory file already contains (set by lookupd compact).",
             series("lookupd_journal_merged_sequence") { directories[$0].file.header.journalSequence }),
        ]
    }
}
