/// libphonenumber's number patterns, compiled for lookupd's hot path.
///
/// The metadata describes numbering plans with regular expressions over digits
/// (`1[3-9]\d{9}`, `0|(1(?:[12]\d|79)\d\d)`). The library evaluates them with ICU's
/// regex engine on every call, which is most of its 30 µs per number. lookupd reads the
/// same expressions once, at start-up, and turns them into deterministic automata
/// (`DigitDFA`, one table step per digit) or, where capture groups matter (the national
/// prefix rules), into a small backtracking program (`DigitProgram`) with the engine's
/// leftmost-first semantics.
///
/// Only the subset the metadata uses is accepted: digits, `\d`, classes of digits and
/// ranges, `(...)`, `(?:...)`, `|`, `?`, `*`, `+`, `{n}`, `{n,}`, `{n,m}` and a final `$`.
/// Anything else is refused with `DigitPatternError`, so a future metadata construct is
/// reported rather than misread.
indirect enum DigitRegex: Equatable {
    /// One digit from a set (bit d for digit d).
    case digits(UInt16)
    case sequence([DigitRegex])
    case choice([DigitRegex])
    /// Greedy repetition; `max` nil for no bound.
    case repetition(DigitRegex, min: Int, max: Int?)
    /// A group, capturing when `capture` (1-based) is set.
    case group(DigitRegex, capture: Int?)
    /// `$`: the end of the input.
    case end

    static let anyDigit: UInt16 = 0x3FF
}

public struct DigitPatternError: Error, Equatable, CustomStringConvertible {
    public var pattern: String
    public var offset: Int
    public var reason: String

    public var description: String { "pattern '\(pattern)' at offset \(offset): \(reason)" }
}

/// A parsed pattern and how many capture groups it has.
struct ParsedPattern {
    let regex: DigitRegex
    let captureCount: Int

    init(_ pattern: String) throws(DigitPatternError) {
        var parser = PatternParser(pattern)
        regex = try parser.parse()
        captureCount = parser.captures
    }
}

private struct PatternParser {
    let text: String
    let bytes: [UInt8]
    var i = 0
    var captures = 0

    init(_ text: String) {
        self.text = text
        bytes = Array(text.utf8)
    }

    func fail(_ reason: String) -> DigitPatternError { DigitPatternError(pattern: text, offset: i, reason: reason) }

    mutating func parse() throws(DigitPatternError) -> DigitRegex {
        let r = try choice()
        guard i == bytes.count else { throw fail("unexpected '\(Character(Unicode.Scalar(bytes[i])))'") }
        return r
    }

    mutating func choice() throws(DigitPatternError) -> DigitRegex {
        var options = [try sequence()]
        while i < bytes.count, bytes[i] == UInt8(ascii: "|") {
            i += 1
            options.append(try sequence())
        }
        return options.count == 1 ? options[0] : .choice(options)
    }

    mutating func sequence() throws(DigitPatternError) -> DigitRegex {
        var items: [DigitRegex] = []
        while i < bytes.count, bytes[i] != UInt8(ascii: "|"), bytes[i] != UInt8(ascii: ")") {
            var atom = try self.atom()
            atom = try quantified(atom)
            items.append(atom)
        }
        return items.count == 1 ? items[0] : .sequence(items)
    }

    mutating func atom() throws(DigitPatternError) -> DigitRegex {
        let c = bytes[i]
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"):
            i += 1
            return .digits(1 << UInt16(c - 0x30))
        case UInt8(ascii: "\\"):
            guard i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "d") else { throw fail("only \\d is supported after a backslash") }
            i += 2
            return .digits(DigitRegex.anyDigit)
        case UInt8(ascii: "["):
            i += 1
            return .digits(try digitClass())
        case UInt8(ascii: "("):
            i += 1
            var capture: Int? = nil
            if i + 1 < bytes.count, bytes[i] == UInt8(ascii: "?") {
                guard bytes[i + 1] == UInt8(ascii: ":") else { throw fail("only (?: groups are supported") }
                i += 2
            } else {
                captures += 1
                capture = captures
            }
            let inner = try choice()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ")") else { throw fail("unclosed group") }
            i += 1
            return .group(inner, capture: capture)
        case UInt8(ascii: "$"):
            i += 1
            return .end
        default:
            throw fail("unsupported character '\(Character(Unicode.Scalar(c)))'")
        }
    }

    mutating func digitClass() throws(DigitPatternError) -> UInt16 {
        var mask: UInt16 = 0
        var negated = false
        if i < bytes.count, bytes[i] == UInt8(ascii: "^") { negated = true; i += 1 }
        while i < bytes.count, bytes[i] != UInt8(ascii: "]") {
            let c = bytes[i]
            if c == UInt8(ascii: "\\"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "d") {
                mask |= DigitRegex.anyDigit
                i += 2
                continue
            }
            guard c >= 0x30, c <= 0x39 else { throw fail("only digits and ranges in a class") }
            if i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "-"), bytes[i + 2] != UInt8(ascii: "]") {
                let hi = bytes[i + 2]
                guard hi >= c, hi <= 0x39 else { throw fail("bad range") }
                for d in c...hi { mask |= 1 << UInt16(d - 0x30) }
                i += 3
            } else {
                mask |= 1 << UInt16(c - 0x30)
                i += 1
            }
        }
        guard i < bytes.count else { throw fail("unclosed class") }
        i += 1
        if negated { mask = ~mask & DigitRegex.anyDigit }
        guard mask != 0 else { throw fail("empty class") }
        return mask
    }

    mutating func quantified(_ atom: DigitRegex) throws(DigitPatternError) -> DigitRegex {
        var r = atom
        while i < bytes.count {
            let c = bytes[i]
            var lo = 0
            var hi: Int? = nil
            switch c {
            case UInt8(ascii: "?"): lo = 0; hi = 1; i += 1
            case UInt8(ascii: "*"): lo = 0; hi = nil; i += 1
            case UInt8(ascii: "+"): lo = 1; hi = nil; i += 1
            case UInt8(ascii: "{"):
                i += 1
                lo = try number()
                if i < bytes.count, bytes[i] == UInt8(ascii: ",") {
                    i += 1
                    hi = (i < bytes.count && bytes[i] == UInt8(ascii: "}")) ? nil : try number()
                } else {
                    hi = lo
                }
                guard i < bytes.count, bytes[i] == UInt8(ascii: "}") else { throw fail("unclosed {") }
                i += 1
                if let h = hi, h < lo { throw fail("bad repetition bounds") }
                // The metadata never needs more; a larger bound would only blow up the program.
                if lo > 40 || (hi ?? 0) > 40 { throw fail("repetition bound above 40") }
            default:
                return r
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "?") || bytes[i] == UInt8(ascii: "+") {
                throw fail("lazy and possessive quantifiers are not supported")
            }
            r = .repetition(r, min: lo, max: hi)
        }
        return r
    }

    mutating func number() throws(DigitPatternError) -> Int {
        var n = 0
        let start = i
        while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39, i - start < 4 {
            n = n * 10 + Int(bytes[i] - 0x30)
            i += 1
        }
        guard i > start else { throw fail("expected a number") }
        return n
    }
}

// MARK: - Deterministic automata

/// A deterministic automaton over the digits 0-9: `next[state * 10 + digit]`, -1 for the
/// dead state. Built once; read-only afterwards.
struct DigitDFA: Sendable, Equatable {
    var next: [Int32]
    var accepting: [Bool]
    var stateCount: Int { accepting.count }

    /// Whether the whole of `digits` matches (`prefix`: whether some prefix of it does; the
    /// automaton must have been built with `prefixMatch`).
    @inline(__always)
    func matches(_ digits: UnsafeBufferPointer<UInt8>) -> Bool {
        var s: Int32 = 0
        for d in digits {
            s = next[Int(s) &* 10 &+ Int(d)]
            if s < 0 { return false }
        }
        return accepting[Int(s)]
    }

    /// Full-match automaton of a pattern (`prefixMatch`: accepts every input that starts
    /// with a match, as a prefix-anchored search does).
    init(_ regex: DigitRegex, prefixMatch: Bool = false) throws(DigitPatternError) {
        var positions = PositionAutomaton()
        let root = try positions.add(regex)
        self = positions.determinize(root, prefixMatch: prefixMatch).minimized()
    }

    init(next: [Int32], accepting: [Bool]) {
        self.next = next
        self.accepting = accepting
    }

    /// Moore's partition refinement: states with the same future merge. State 0 stays the start.
    func minimized() -> DigitDFA {
        var result = minimizedWithClasses(initial: accepting.map { $0 ? 1 : 0 }).dfa
        result.removeDeadStates()
        return result
    }

    /// Minimizes given an initial partition (states with different outputs never merge).
    /// Returns the automaton and, for each new state, one old state it stands for.
    func minimizedWithClasses(initial: [Int]) -> (dfa: DigitDFA, representative: [Int]) {
        let cls = acyclicClasses(initial) ?? mooreClasses(initial)
        let classCount = (cls.max() ?? -1) + 1
        // Renumber so that the start state's class is 0, in first-seen order.
        var order = [Int](repeating: -1, count: classCount)
        var representative: [Int] = []
        for s in 0..<stateCount where order[cls[s]] < 0 {
            order[cls[s]] = representative.count
            representative.append(s)
        }
        var newNext = [Int32](repeating: -1, count: representative.count * 10)
        var newAccepting = [Bool](repeating: false, count: representative.count)
        for (c, s) in representative.enumerated() {
            newAccepting[c] = accepting[s]
            for d in 0..<10 {
                let t = Int(next[s * 10 + d])
                newNext[c * 10 + d] = t < 0 ? -1 : Int32(order[cls[t]])
            }
        }
        return (DigitDFA(next: newNext, accepting: newAccepting), representative)
    }

    /// The metadata's patterns have bounded repetitions, so their automata have no cycles
    /// but self-loops (a matched prefix): then one pass from the leaves up names every
    /// state by its output and its successors' names. nil for an automaton with cycles.
    private func acyclicClasses(_ output: [Int]) -> [Int]? {
        let n = stateCount
        // Post-order by an explicit depth-first walk; a back edge other than a self-loop
        // means a cycle.
        var state = [UInt8](repeating: 0, count: n)  // 0 new, 1 on the stack, 2 done
        var post: [Int] = []
        post.reserveCapacity(n)
        var stack: [(Int, Int)] = []
        for root in 0..<n where state[root] == 0 {
            stack.append((root, 0))
            state[root] = 1
            while let (s, d) = stack.last {
                if d == 10 {
                    stack.removeLast()
                    state[s] = 2
                    post.append(s)
                    continue
                }
                stack[stack.count - 1].1 = d + 1
                let t = Int(next[s * 10 + d])
                if t < 0 || t == s { continue }
                if state[t] == 1 { return nil }
                if state[t] == 0 {
                    state[t] = 1
                    stack.append((t, 0))
                }
            }
        }
        var cls = [Int](repeating: -1, count: n)
        var names: [StateKey: Int] = [:]
        names.reserveCapacity(n)
        var key = [Int32](repeating: 0, count: 11)
        for s in post {
            key[0] = Int32(output[s])
            for d in 0..<10 {
                let t = Int(next[s * 10 + d])
                key[d + 1] = t < 0 ? -1 : t == s ? -2 : Int32(cls[t])
            }
            let k = StateKey(key)
            if let c = names[k] { cls[s] = c } else {
                cls[s] = names.count
                names[k] = names.count
            }
        }
        return cls
    }

    /// Moore's partition refinement, for automata with cycles.
    private func mooreClasses(_ initial: [Int]) -> [Int] {
        let n = stateCount
        var cls = initial
        var classCount = Set(cls).count
        while true {
            var signatures: [StateKey: Int] = [:]
            var next = [Int](repeating: 0, count: n)
            var key = [Int32](repeating: 0, count: 11)
            for s in 0..<n {
                key[0] = Int32(cls[s])
                for d in 0..<10 {
                    let t = Int(self.next[s * 10 + d])
                    key[d + 1] = t < 0 ? -1 : Int32(cls[t])
                }
                let k = StateKey(key)
                if let c = signatures[k] { next[s] = c } else {
                    next[s] = signatures.count
                    signatures[k] = signatures.count
                }
            }
            cls = next
            if signatures.count == classCount { return cls }
            classCount = signatures.count
        }
    }

    /// States from which no accepting state is reachable become the dead state -1 (the start
    /// state stays, as a state with no way out, if nothing is accepted at all).
    mutating func removeDeadStates() {
        DigitDFA.cutDeadStates(&next, alive: accepting)
    }

    /// Redirects every transition into a state from which none of the `alive` ones can be
    /// reached to -1.
    static func cutDeadStates(_ next: inout [Int32], alive seeds: [Bool]) {
        let n = seeds.count
        var alive = seeds
        var changed = true
        while changed {
            changed = false
            for s in 0..<n where !alive[s] {
                for d in 0..<10 {
                    let t = Int(next[s * 10 + d])
                    if t >= 0, alive[t] { alive[s] = true; changed = true; break }
                }
            }
        }
        for k in 0..<next.count where next[k] >= 0 && !alive[Int(next[k])] { next[k] = -1 }
    }
}

/// A dictionary key for a state of an automaton under construction (a set of positions, a
/// tuple of states, a signature): hashed once with FNV-1a, which is several times cheaper
/// than hashing element by element.
struct StateKey: Hashable {
    let values: [Int32]
    let hash: UInt64

    init(_ values: [Int32]) {
        self.values = values
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for v in values { h = (h ^ UInt64(UInt32(bitPattern: v))) &* 0x100_0000_01b3 }
        hash = h
    }

    static func == (a: StateKey, b: StateKey) -> Bool { a.hash == b.hash && a.values == b.values }
    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}

/// Glushkov's position automaton: one position per digit set in the pattern (repetitions
/// expanded), with the positions that may follow each. Determinized by subsets of positions;
/// no epsilon moves, so no closures to compute.
private struct PositionAutomaton {
    var masks: [UInt16] = []
    var follow: [[Int32]] = []

    struct Piece {
        var nullable: Bool
        var first: [Int32]
        var last: [Int32]
    }

    mutating func add(_ r: DigitRegex) throws(DigitPatternError) -> Piece {
        switch r {
        case .digits(let mask):
            masks.append(mask)
            follow.append([])
            let p = Int32(masks.count - 1)
            return Piece(nullable: false, first: [p], last: [p])
        case .sequence(let items):
            var piece = Piece(nullable: true, first: [], last: [])
            for item in items { piece = concatenate(piece, try add(item)) }
            return piece
        case .choice(let options):
            var piece = Piece(nullable: false, first: [], last: [])
            for option in options {
                let o = try add(option)
                piece.nullable = piece.nullable || o.nullable
                piece.first += o.first
                piece.last += o.last
            }
            return piece
        case .group(let inner, _):
            return try add(inner)
        case .repetition(let inner, let lo, let hi):
            var piece = Piece(nullable: true, first: [], last: [])
            for _ in 0..<lo { piece = concatenate(piece, try add(inner)) }
            if let hi {
                for _ in lo..<hi {
                    var optional = try add(inner)
                    optional.nullable = true
                    piece = concatenate(piece, optional)
                }
            } else {
                var star = try add(inner)
                for p in star.last { follow[Int(p)] += star.first }
                star.nullable = true
                piece = concatenate(piece, star)
            }
            return piece
        case .end:
            throw DigitPatternError(pattern: "", offset: 0, reason: "'$' cannot be compiled into an automaton")
        }
    }

    private mutating func concatenate(_ a: Piece, _ b: Piece) -> Piece {
        for p in a.last { follow[Int(p)] += b.first }
        return Piece(nullable: a.nullable && b.nullable,
                     first: a.nullable ? a.first + b.first : a.first,
                     last: b.nullable ? a.last + b.last : b.last)
    }

    mutating func determinize(_ root: Piece, prefixMatch: Bool) -> DigitDFA {
        let count = masks.count
        var isLast = [Bool](repeating: false, count: count)
        for p in root.last { isLast[Int(p)] = true }
        for p in 0..<count { follow[p] = Array(Set(follow[p])).sorted() }
        let first = Array(Set(root.first)).sorted()
        // DFA states are sets of positions just read; the start state reads none.
        var ids: [StateKey: Int32] = [:]
        var sets: [[Int32]] = [[]]
        var next: [Int32] = []
        var accepting: [Bool] = []
        var mark = [Int32](repeating: -1, count: count)
        var generation: Int32 = 0
        var targets: [[Int32]] = Array(repeating: [], count: 10)
        var i = 0
        while i < sets.count {
            let set = sets[i]
            let accepts = i == 0 ? root.nullable : set.contains { isLast[Int($0)] }
            accepting.append(accepts)
            if accepts && prefixMatch {
                // Matched: whatever follows, the input starts with a match.
                for _ in 0..<10 { next.append(Int32(i)) }
                i += 1
                continue
            }
            for d in 0..<10 { targets[d].removeAll(keepingCapacity: true) }
            func consider(_ candidates: [Int32]) {
                for q in candidates {
                    let m = masks[Int(q)]
                    var bits = m
                    while bits != 0 {
                        let d = bits.trailingZeroBitCount
                        targets[d].append(q)
                        bits &= bits - 1
                    }
                }
            }
            if i == 0 { consider(first) } else { for p in set { consider(follow[Int(p)]) } }
            for d in 0..<10 {
                if targets[d].isEmpty { next.append(-1); continue }
                generation += 1
                var target: [Int32] = []
                target.reserveCapacity(targets[d].count)
                for q in targets[d] where mark[Int(q)] != generation {
                    mark[Int(q)] = generation
                    target.append(q)
                }
                target.sort()
                let key = StateKey(target)
                if let id = ids[key] { next.append(id) } else {
                    let id = Int32(sets.count)
                    ids[key] = id
                    sets.append(target)
                    next.append(id)
                }
            }
            i += 1
        }
        return DigitDFA(next: next, accepting: accepting)
    }
}

// MARK: - Backtracking with captures

/// A pattern as a backtracking program, for the national-prefix rules whose capture groups
/// say what to keep (`0|([2-9]\d{6})$` with the transform `441$1`). Semantics are those of
/// the regex engines libphonenumber uses (ICU, RE2 in longest-first off): alternatives and
/// greedy quantifiers are tried in order and the first match wins; `consume` anchors at
/// the start only.
///
/// A plain value (its code lives in memory allocated once and never freed, like the
/// metadata it comes from), so reading one on the hot path counts no references.
struct DigitProgram: @unchecked Sendable, Equatable {
    enum Instruction: Sendable, Equatable {
        case digits(UInt16)
        /// Try `first`, then `second`.
        case split(Int32, Int32)
        case jump(Int32)
        case save(Int32)
        case end
        case match
    }

    private let code: UnsafePointer<Instruction>
    let length: Int
    let captureCount: Int
    /// Whether the empty input matches.
    let matchesEmpty: Bool
    /// Bit d: a match of one digit, d, may exist.
    private let singleDigits: UInt16
    /// Bit 10·a+b: a match may start with the digits a, b. With `singleDigits` and
    /// `matchesEmpty` it refuses most inputs before the program runs.
    private let pairs: (UInt64, UInt64)

    /// Most backtracking steps one call may take; the metadata's patterns need a few hundred.
    static let stepLimit = 20_000

    init(_ pattern: ParsedPattern) {
        var builder = ProgramBuilder()
        builder.emit(pattern.regex)
        builder.code.append(.match)
        let code = builder.code
        let stored = UnsafeMutablePointer<Instruction>.allocate(capacity: code.count)
        stored.initialize(from: code, count: code.count)
        self.code = UnsafePointer(stored)
        length = code.count
        captureCount = pattern.captureCount
        // Simulate the program on every one- and two-digit start, all branches at once
        // (captures ignored, `$` taken as possibly true: a filter may only err towards "run").
        func closure(_ pcs: [Int]) -> (Set<Int>, Bool) {
            var seen = Set<Int>()
            var stack = pcs
            var matched = false
            while let pc = stack.popLast() {
                guard seen.insert(pc).inserted else { continue }
                switch code[pc] {
                case .digits: break
                case .split(let a, let b): stack.append(Int(a)); stack.append(Int(b))
                case .jump(let t): stack.append(Int(t))
                case .save, .end: stack.append(pc + 1)
                case .match: matched = true
                }
            }
            return (seen, matched)
        }
        func step(_ pcs: Set<Int>, _ d: Int) -> [Int] {
            pcs.compactMap { pc in
                if case .digits(let m) = code[pc], m & (1 << UInt16(d)) != 0 { return pc + 1 }
                return nil
            }
        }
        let (start, empty) = closure([0])
        matchesEmpty = empty
        var single: UInt16 = 0
        var low: UInt64 = 0, high: UInt64 = 0
        for a in 0..<10 {
            let after = step(start, a)
            guard !after.isEmpty else { continue }
            let (s1, matched1) = closure(after)
            if matched1 { single |= 1 << UInt16(a) }
            for b in 0..<10 where !step(s1, b).isEmpty {
                let bit = a * 10 + b
                if bit < 64 { low |= 1 << UInt64(bit) } else { high |= 1 << UInt64(bit - 64) }
            }
        }
        singleDigits = single
        pairs = (low, high)
    }

    /// Whether a match may start at the beginning of `digits` (false: certainly not).
    @inline(__always)
    func mayMatch(_ digits: UnsafeBufferPointer<UInt8>) -> Bool {
        if matchesEmpty { return true }
        guard let a = digits.first else { return false }
        if singleDigits & (1 << UInt16(a)) != 0 { return true }
        guard digits.count >= 2 else { return false }
        let bit = Int(a) * 10 + Int(digits[1])
        return bit < 64 ? pairs.0 & (1 << UInt64(bit)) != 0 : pairs.1 & (1 << UInt64(bit - 64)) != 0
    }

    /// A match at the start of `digits`: its length and the spans of the capture groups
    /// (`captures[2k]`, `captures[2k+1]` for group k+1; -1 when the group did not take part).
    /// nil when nothing matches, or the step limit ran out.
    func consume(_ digits: UnsafeBufferPointer<UInt8>, captures: inout CaptureSpans) -> Int? {
        guard mayMatch(digits) else { return nil }
        captures.reset()
        var steps = 0
        return run(pc: 0, at: 0, digits, &captures, &steps)
    }

    static func == (a: DigitProgram, b: DigitProgram) -> Bool {
        a.length == b.length && a.captureCount == b.captureCount && (0..<a.length).allSatisfy { a.code[$0] == b.code[$0] }
    }

    private func run(pc start: Int, at position: Int, _ digits: UnsafeBufferPointer<UInt8>,
                     _ captures: inout CaptureSpans, _ steps: inout Int) -> Int? {
        var pc = start
        var sp = position
        while true {
            steps += 1
            if steps > DigitProgram.stepLimit { return nil }
            switch code[pc] {
            case .digits(let mask):
                guard sp < digits.count, mask & (1 << UInt16(digits[sp])) != 0 else { return nil }
                sp += 1
                pc += 1
            case .split(let a, let b):
                let saved = captures
                if let end = run(pc: Int(a), at: sp, digits, &captures, &steps) { return end }
                captures = saved
                pc = Int(b)
            case .jump(let t):
                pc = Int(t)
            case .save(let slot):
                let old = captures[Int(slot)]
                captures[Int(slot)] = sp
                if let end = run(pc: pc + 1, at: sp, digits, &captures, &steps) { return end }
                captures[Int(slot)] = old
                return nil
            case .end:
                guard sp == digits.count else { return nil }
                pc += 1
            case .match:
                return sp
            }
        }
    }
}

/// Capture spans for up to four groups, without heap storage.
struct CaptureSpans {
    private var slots: (Int, Int, Int, Int, Int, Int, Int, Int) = (-1, -1, -1, -1, -1, -1, -1, -1)

    mutating func reset() { slots = (-1, -1, -1, -1, -1, -1, -1, -1) }

    subscript(i: Int) -> Int {
        get { withUnsafeBytes(of: slots) { $0.load(fromByteOffset: i * MemoryLayout<Int>.stride, as: Int.self) } }
        set { withUnsafeMutableBytes(of: &slots) { $0.storeBytes(of: newValue, toByteOffset: i * MemoryLayout<Int>.stride, as: Int.self) } }
    }

    /// The span of group `k` (1-based); nil when it did not take part.
    func group(_ k: Int) -> Range<Int>? {
        guard k >= 1, k <= 4 else { return nil }
        let a = self[2 * (k - 1)], b = self[2 * (k - 1) + 1]
        return a >= 0 && b >= a ? a..<b : nil
    }
}

private struct ProgramBuilder {
    var code: [DigitProgram.Instruction] = []

    mutating func emit(_ r: DigitRegex) {
        switch r {
        case .digits(let m):
            code.append(.digits(m))
        case .sequence(let items):
            for item in items { emit(item) }
        case .choice(let options):
            // split L1, next; L1: option1; jump end; next: split L2, ...; last option
            var jumps: [Int] = []
            for (k, option) in options.enumerated() {
                if k < options.count - 1 {
                    let split = code.count
                    code.append(.split(0, 0))
                    emit(option)
                    jumps.append(code.count)
                    code.append(.jump(0))
                    code[split] = .split(Int32(split + 1), Int32(code.count))
                } else {
                    emit(option)
                }
            }
            for j in jumps { code[j] = .jump(Int32(code.count)) }
        case .group(let inner, let capture):
            if let capture, capture <= 4 {
                code.append(.save(Int32(2 * (capture - 1))))
                emit(inner)
                code.append(.save(Int32(2 * (capture - 1) + 1)))
            } else {
                emit(inner)
            }
        case .repetition(let inner, let lo, let hi):
            for _ in 0..<lo { emit(inner) }
            if let hi {
                // Greedy optional copies: split body, skip.
                var skips: [Int] = []
                for _ in lo..<hi {
                    skips.append(code.count)
                    code.append(.split(0, 0))
                    emit(inner)
                }
                for s in skips { code[s] = .split(Int32(s + 1), Int32(code.count)) }
            } else {
                let loop = code.count
                code.append(.split(0, 0))
                emit(inner)
                code.append(.jump(Int32(loop)))
                code[loop] = .split(Int32(loop + 1), Int32(code.count))
            }
        case .end:
            code.append(.end)
        }
    }
}
