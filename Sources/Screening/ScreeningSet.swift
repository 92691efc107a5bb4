import Directory
import Identity

/// The decision chain over one consistent set of lists and rules.
///
/// Order:
/// 1. a caller on the bypass list is not screened at all;
/// 2. a withheld identity goes to the `anonymous-callers` policy, a caller
///    that is not a telephone number (empty, too short, all zeros, letters, a
///    length its country's numbers never have) to `invalid-callers`;
/// 3. contacts: the callee's own (`contacts-dir`), then the global lists;
///    a contact is never blocked and is labelled with the contact's name
///    (unless its STIR/SHAKEN validation failed and the configuration says
///    not to trust contacts then);
/// 3b. the callee's own block list (`blocks-dir`), as a directory of the
///    highest priority for calls to that callee;
/// 4. the directories in the operator's priority order (each one's journal
///    on top of its file, directories outside their `active=` window
///    skipped): a number is blocked if any directory blocks it (the source
///    named is the highest-priority directory that blocks) unless a
///    directory of higher priority than every blocking one allows it (an
///    `allow` entry: the blocks below are overridden, the allowing entry is
///    the source, its label if it has one is shown, the overridden blocks'
///    labels never); its label comes from
///    the highest-priority directory that identifies it; within one
///    directory an exact entry beats a prefix rule and a longer prefix beats
///    a shorter one;
/// 5. `Privacy: id` turns anything not blocked into a withheld caller;
/// 6. a number its country's plan holds no range for (it cannot exist) and
///    that no directory blocks goes to `invalid-callers`: `block` blocks it, a
///    directory's label beats the policy's;
/// 7. the `verstat-failed` / `verstat-no-validation` policies for callers
///    neither blocked nor contacts;
/// 8. `unknown-label = attribution`: an unknown caller is labelled with its
///    number's attribution (region and carrier).
///
/// Pure logic over immutable inputs: any number of threads may call
/// `decide` at once. A reload or a journal update builds a new set and
/// swaps it in; requests holding the old one finish on it.
public final class ScreeningSet: Sendable {
    public let normalizer: NumberNormalizer
    public let contacts: [ContactList]
    public let directories: [ScreeningDirectory]
    public let calleeContacts: CalleeContacts
    public let calleeBlocks: CalleeBlocks
    public let policies: CallerPolicies
    /// `attribution = LANG`: region and carrier of numbers; nil when off.
    public let attribution: Attribution?
    /// Some directory or policy has time windows: callers should pass the time.
    public let usesTime: Bool

    public init(normalizer: NumberNormalizer, contacts: [ContactList], directories: [ScreeningDirectory],
                calleeContacts: CalleeContacts = .none, policies: CallerPolicies = CallerPolicies(),
                attribution: Attribution? = nil, calleeBlocks: CalleeBlocks = .none) {
        self.normalizer = normalizer
        self.contacts = contacts
        self.directories = directories
        self.calleeContacts = calleeContacts
        self.calleeBlocks = calleeBlocks
        self.policies = policies
        self.attribution = attribution
        self.usesTime = policies.usesTime || directories.contains { $0.active != nil }
        self.warmsBatches = directories.contains { $0.file.count >= ScreeningSet.warmedEntries }
    }

    /// Directories of fewer entries are not warmed (`prefetch`): 2^22 entries are 48 MiB of
    /// keys and values, more than the last-level cache of this machine (32 MiB) and of most
    /// servers; a smaller directory's search paths are mostly in the cache already, and the
    /// warm-up's reading of every message's headers would be paid for nothing. (The gain was
    /// measured at 10^8 entries only: docs/BENCHMARKS.md, "The daemon's receive batch".)
    public static let warmedEntries = 1 << 22

    /// Some directory is large enough to be warmed for a batch of callers.
    public let warmsBatches: Bool

    /// The same set with directory `index` replaced (a journal update or a
    /// compacted file); everything else is shared.
    public func replacing(directory index: Int, with directory: ScreeningDirectory) -> ScreeningSet {
        var directories = self.directories
        directories[index] = directory
        return ScreeningSet(normalizer: normalizer, contacts: contacts, directories: directories,
                            calleeContacts: calleeContacts, policies: policies, attribution: attribution, calleeBlocks: calleeBlocks)
    }

    // MARK: - Deciding

    /// Warms every directory's search paths for `numbers` (`DirectoryFile.prefetchBatch`),
    /// so that the decisions which follow, each looking its number up one directory at a
    /// time, find the slots in the cache. Changes nothing a decision reads.
    /// Only directories of at least `entries` entries (the fuzz harness warms every one, so
    /// that its small ones are read through this path too).
    public func prefetch(_ numbers: UnsafeBufferPointer<PhoneNumber>, atLeast entries: Int = ScreeningSet.warmedEntries) {
        for directory in directories where directory.file.count >= entries {
            directory.file.prefetchBatch(numbers)
        }
    }

    /// Screens a number given as text (not a URI: the SIP layer reads those), without
    /// call context.
    public func decide(identity: String) -> Decision {
        decide(caller: identity, context: CallContext())
    }

    public func decide(identity: UnsafeRawBufferPointer) -> Decision {
        decide(caller: identity, context: CallContext())
    }

    /// Screens a number given as text; nil counts as a withheld identity.
    public func decide(caller: String?, context: CallContext) -> Decision {
        guard var caller else { return decide(caller: nil as CallerIdentity?, context: context) }
        return caller.withUTF8 { decide(caller: UnsafeRawBufferPointer($0), context: context) }
    }

    /// Screens a number given as bytes of text (not a URI).
    public func decide(caller: UnsafeRawBufferPointer?, context: CallContext) -> Decision {
        decide(caller: caller.map { CallerIdentity.bare($0) }, context: context)
    }

    /// Screens one call. `caller` is the identity the SIP layer extracted (or a bare number);
    /// nil, or one without a number (`sip:anonymous.invalid`), counts as withheld.
    public func decide(caller: CallerIdentity?, context: CallContext) -> Decision {
        guard let caller, caller.number != nil else { return withheld(context, isContact: false) }
        let normalized = normalizer.normalize(caller)
        if !policies.bypass.isEmpty,
           policies.bypass.matches(dialled: normalizer.dialledDigits(caller), number: normalized.number) {
            return Decision(verdict: .bypassed, number: normalized.number, source: .policy(.bypass), policy: .bypass)
        }
        switch normalized {
        case .anonymous: return withheld(context, isContact: false)
        case .invalid(let reason): return invalidCaller(reason, context)
        case .number(let number): return decide(number, context: context)
        case .notInPlan(let number, let reason): return decide(number, context: context, notInPlan: reason)
        }
    }

    public func decide(_ caller: NormalizedNumber) -> Decision {
        switch caller {
        case .anonymous: return withheld(CallContext(), isContact: false)
        case .invalid(let reason): return invalidCaller(reason, CallContext())
        case .number(let number): return decide(number, context: CallContext())
        case .notInPlan(let number, let reason): return decide(number, context: CallContext(), notInPlan: reason)
        }
    }

    /// Screens an E.164 number (judged against its country's plan first).
    public func decide(_ number: PhoneNumber) -> Decision {
        decide(number, context: CallContext(), notInPlan: normalizer.notInPlanReason(number))
    }

    /// Screens a number. `notInPlan`: why its country's plan cannot hold it, when it cannot.
    public func decide(_ number: PhoneNumber, context: CallContext, notInPlan: InvalidNumber? = nil) -> Decision {
        var contact: (source: DecisionSource, label: LabelReference)? = nil
        if let list = calleeContacts.list(for: context.callee, normalizer: normalizer),
           let name = calleeContacts.lists[list].lookup(number) {
            contact = (.calleeContacts(list), .calleeContact(list: list, name: name))
        } else {
            for (i, list) in contacts.enumerated() {
                if let name = list.lookup(number) {
                    contact = (.contacts(i), .contact(list: i, name: name))
                    break
                }
            }
        }
        var distrusted = false
        if contact != nil, context.verstat == .failed, policies.distrustContactsOnFailedValidation {
            contact = nil
            distrusted = true
        }
        if let contact {
            if context.privacy { return withheld(context, isContact: true) }
            return Decision(verdict: .contact, number: number, label: contact.label, source: contact.source, match: .exact(number))
        }

        var blocking: (source: DecisionSource, hit: DirectoryHit)? = nil
        var allowing: (source: DecisionSource, hit: DirectoryHit)? = nil
        var labelling: (source: DecisionSource, hit: DirectoryHit)? = nil
        if !calleeBlocks.isEmpty, let list = calleeBlocks.list(for: context.callee, normalizer: normalizer),
           let hit = calleeBlocks.lists[list].hit(number, list: list) {
            if hit.allowed { allowing = (.calleeBlocks(list), hit) } else if hit.blocked { blocking = (.calleeBlocks(list), hit) }
            if hit.label != nil { labelling = (.calleeBlocks(list), hit) }
        }
        var inactive: Int? = nil
        var damaged: Int? = nil
        for (i, directory) in directories.enumerated() where blocking == nil && allowing == nil || labelling == nil {
            if let active = directory.active, let time = context.time, !active.contains(time) {
                if inactive == nil, (try? directory.lookup(number, index: i)) != nil { inactive = i }
                continue
            }
            let found: DirectoryHit?
            do { found = try directory.lookup(number, index: i) } catch {
                // Never an answer from damaged bytes: this directory has no say.
                if damaged == nil { damaged = i }
                continue
            }
            guard let hit = found else { continue }
            // The first allow or block in priority order settles whether the number is blocked.
            if blocking == nil, allowing == nil {
                if hit.allowed { allowing = (.directory(i), hit) } else if hit.blocked { blocking = (.directory(i), hit) }
            }
            // An overridden block's label says why it blocked: not shown on an allowed call.
            if hit.label != nil, labelling == nil, !(allowing != nil && hit.blocked) { labelling = (.directory(i), hit) }
            if blocking != nil || allowing != nil, labelling != nil { break }
        }
        var decision = decideFromDirectories(number, blocking: blocking, allowing: allowing, labelling: labelling, inactive: inactive,
                                             distrusted: distrusted, notInPlan: notInPlan, context: context)
        decision.damagedDirectory = damaged
        return decision
    }

    private func decideFromDirectories(_ number: PhoneNumber, blocking: (source: DecisionSource, hit: DirectoryHit)?,
                                       allowing: (source: DecisionSource, hit: DirectoryHit)?, labelling: (source: DecisionSource, hit: DirectoryHit)?, inactive: Int?,
                                       distrusted: Bool, notInPlan: InvalidNumber?, context: CallContext) -> Decision {
        let policy: PolicyRule? = distrusted ? .contactDistrusted : nil
        if let blocking {
            return Decision(verdict: .blocked, number: number, label: labelling?.hit.label, source: blocking.source,
                            match: blocking.hit.match, invalidReason: notInPlan, journalRecord: blocking.hit.record, replicatedRevision: blocking.hit.revision,
                            policy: policy, inactiveDirectory: inactive)
        }
        // RFC 3325 Privacy: id asks that the callee not learn who calls:
        // no label, treated as withheld. It is no shield against a block,
        // or every spammer would send it.
        if context.privacy { return withheld(context, isContact: false) }
        var decision: Decision
        if let allowing {
            // The allowing list vouches for the number: its own name for it stands.
            let label = allowing.hit.label ?? labelling?.hit.label
            decision = Decision(verdict: label == nil ? .unknown : .identified, number: number, label: label,
                                source: allowing.source, match: allowing.hit.match, invalidReason: notInPlan,
                                journalRecord: allowing.hit.record, replicatedRevision: allowing.hit.revision,
                                policy: policy, inactiveDirectory: inactive)
            decision.allowed = true
        } else if let labelling {
            decision = Decision(verdict: .identified, number: number, label: labelling.hit.label, source: labelling.source,
                                match: labelling.hit.match, invalidReason: notInPlan, journalRecord: labelling.hit.record, replicatedRevision: labelling.hit.revision,
                                policy: policy, inactiveDirectory: inactive)
        } else if let notInPlan {
            decision = Decision(verdict: .invalid, number: number, invalidReason: notInPlan, policy: policy, inactiveDirectory: inactive)
        } else {
            decision = Decision(verdict: .unknown, number: number, policy: policy, inactiveDirectory: inactive)
        }
        if notInPlan != nil {
            // A number that cannot exist (the do-not-originate rule): invalid-callers,
            // whose block beats a directory's label and whose label does not.
            switch policies.invalid.effective(at: context.time) {
            case .allow:
                break
            case .label:
                if decision.label == nil {
                    decision.label = .policy(.invalid)
                    decision.source = .policy(.invalid)
                    decision.policy = .invalid
                }
            case .block:
                return Decision(verdict: .blocked, number: number, source: .policy(.invalid), invalidReason: notInPlan,
                                policy: .invalid, inactiveDirectory: inactive)
            }
            return decision
        }
        switch context.verstat {
        case .failed:
            // A failed validation means the number may be spoofed: the
            // label of the number it claims would mislead, so a policy
            // label replaces it.
            applyVerification(policies.verstatFailed, .verstatFailed, replacingLabel: true, to: &decision, context)
        case .noValidation:
            applyVerification(policies.verstatNoValidation, .verstatNoValidation, replacingLabel: false, to: &decision, context)
        case .absent, .passed, .other:
            break
        }
        if decision.verdict == .unknown, decision.label == nil, policies.unknownLabel == .attribution, let attribution,
           attribution.withDescription(number, { !$0.isEmpty }) {
            decision.label = .attribution(number)
        }
        return decision
    }

    private func applyVerification(_ setting: PolicySetting, _ rule: PolicyRule, replacingLabel: Bool,
                                   to decision: inout Decision, _ context: CallContext) {
        switch setting.effective(at: context.time) {
        case .allow:
            break
        case .label:
            guard replacingLabel || decision.label == nil else { return }
            decision.label = .policy(rule)
            decision.source = .policy(rule)
            decision.policy = rule
        case .block:
            decision = Decision(verdict: .blocked, number: decision.number, source: .policy(rule), policy: rule,
                                inactiveDirectory: decision.inactiveDirectory)
        }
    }

    /// A withheld identity (or `Privacy: id`): the anonymous-callers policy.
    /// A contact asking for privacy is never blocked by it.
    private func withheld(_ context: CallContext, isContact: Bool) -> Decision {
        switch policies.anonymous.effective(at: context.time) {
        case .allow:
            return Decision(verdict: .anonymous)
        case .label:
            return Decision(verdict: .anonymous, label: .policy(.anonymous), source: .policy(.anonymous), policy: .anonymous)
        case .block:
            if isContact { return Decision(verdict: .anonymous) }
            return Decision(verdict: .blocked, source: .policy(.anonymous), policy: .anonymous)
        }
    }

    private func invalidCaller(_ reason: InvalidNumber, _ context: CallContext) -> Decision {
        switch policies.invalid.effective(at: context.time) {
        case .allow:
            return Decision(verdict: .invalid, invalidReason: reason)
        case .label:
            return Decision(verdict: .invalid, label: .policy(.invalid), source: .policy(.invalid), invalidReason: reason, policy: .invalid)
        case .block:
            return Decision(verdict: .blocked, source: .policy(.invalid), invalidReason: reason, policy: .invalid)
        }
    }


    // MARK: - Reading decisions

    /// The blocks an allow entry overrode: the entries of the lower-priority directories
    /// (in force at the call's time) that block the decision's number, in priority order.
    /// Empty unless `decision.allowed`. Looked up again rather than carried in the
    /// decision, which stays a small value; only the log and `--json` ask.
    public func overriddenBlocks(_ decision: Decision, context: CallContext = CallContext()) -> [(directory: Int, match: NumberPattern)] {
        guard decision.allowed, let number = decision.number else { return [] }
        let first: Int
        switch decision.source {
        case .directory(let allowing)?: first = allowing + 1
        case .calleeBlocks?: first = 0
        default: return []
        }
        var overridden: [(directory: Int, match: NumberPattern)] = []
        for i in directories.indices where i >= first {
            let directory = directories[i]
            if let active = directory.active, let time = context.time, !active.contains(time) { continue }
            if let hit = try? directory.lookup(number, index: i), hit.blocked { overridden.append((i, hit.match)) }
        }
        return overridden
    }

    /// Reads a label without copying it. The bytes are valid only inside `body`.
    ///
    /// Inlined into the caller, where `R` is known, like `DirectoryFile.withIntactLabel`:
    /// a generic call from another module instantiates `Optional<R>`'s metadata each time.
    @inlinable
    public func withLabel<R>(_ reference: LabelReference, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var result: R?
        try withLabelBytes(reference) { result = try body($0) }
        return result!
    }

    /// `withLabel`'s work, not generic: calls `body` exactly once.
    @usableFromInline
    func withLabelBytes(_ reference: LabelReference, _ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        switch reference {
        case .directory(let index, let label):
            try directories[index].file.withLabel(label, body)
        case .contact(let list, let name):
            try contacts[list].withName(name, body)
        case .journal(let index, let label):
            try directories[index].overlay.labelBytes(label, body)
        case .replicated(let index, let key):
            try directories[index].replicatedLabel(key, body)
        case .calleeContact(let list, let name):
            try calleeContacts.lists[list].withName(name, body)
        case .calleeBlock(let list, let label):
            try calleeBlocks.lists[list].withLabel(label, body)
        case .policy(let rule):
            if case .label(let text)? = policies.setting(rule)?.action { return try text.withUnsafeBytes(body) }
            try body(UnsafeRawBufferPointer(start: nil, count: 0))
        case .attribution(let number):
            guard let attribution else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            try attribution.withDescription(number, body)
        }
    }

    /// `withLabel`, but nil (and `body` not called) when the label was in a
    /// file served from disk that lost a page since the lookup verified it
    /// (`DirectoryFile.withIntactLabel`): the decision that named it must be
    /// made again, which no longer reads that file.
    @inlinable
    public func withIntactLabel<R>(_ reference: LabelReference, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        var result: R?
        try withIntactLabelBytes(reference) { result = try body($0) }
        return result
    }

    @usableFromInline
    func withIntactLabelBytes(_ reference: LabelReference, _ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        if case .directory(let index, let label) = reference { _ = try directories[index].file.withIntactLabel(label, body); return }
        try withLabelBytes(reference, body)
    }

    public func label(_ reference: LabelReference) -> String {
        withLabel(reference) { String(decoding: $0, as: UTF8.self) }
    }

    /// The configured name of a decision's source: a contacts file, a
    /// directory's name, `policy:KEY`.
    public func sourceName(_ source: DecisionSource) -> String {
        switch source {
        case .contacts(let i): return contacts[i].name
        case .directory(let i): return directories[i].name
        case .calleeContacts(let i): return calleeContacts.lists[i].name
        case .calleeBlocks(let i): return calleeBlocks.lists[i].name
        case .policy(let rule): return "policy:" + rule.rawValue
        }
    }
}
