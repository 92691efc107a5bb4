// lookupd-fuzz: the fuzz targets of Sources/FuzzTargets.
//
//   lookupd-fuzz TARGET [libFuzzer flags] [CORPUS...]   built by scripts/fuzz (libFuzzer + ASan)
//   lookupd-fuzz TARGET FILE|FOLDER...                  any other build: replays the inputs
//
// SwiftPM links every Swift executable with `--defsym main=<module>_main`,
// and `-sanitize=fuzzer` links libFuzzer's own main() as a whole archive,
// so the two collide. scripts/fuzz therefore compiles with
// `-sanitize=address -sanitize-coverage=...` (the instrumentation
// `-sanitize=fuzzer` would add) and links libclang_rt.fuzzer_no_main, whose
// LLVMFuzzerRunDriver this main calls.
import FuzzTargets
import Glibc

func complain(_ text: String) {
    var text = text + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
#if LOOKUPD_FUZZER
import CFuzzer
#endif

let arguments = CommandLine.arguments
let targets = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
    complain("usage: lookupd-fuzz TARGET [libFuzzer flags] [CORPUS...]\n       lookupd-fuzz TARGET FILE|FOLDER...  (replay; builds without libFuzzer)\ntargets: \(targets)")
    exit(2)
}

#if LOOKUPD_FUZZER
nonisolated(unsafe) var selected = target
// libFuzzer sees the program name followed by everything after TARGET.
var argv: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + arguments.dropFirst(2)).map { strdup($0) } + [nil]
var argc = Int32(argv.count - 1)
let status = argv.withUnsafeMutableBufferPointer { buffer -> Int32 in
    var pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
    return LLVMFuzzerRunDriver(&argc, &pointer) { data, size in
        selected.run(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
exit(status)
#else
var inputs: [String] = []
for path in arguments.dropFirst(2) {
    var st = stat()
    guard stat(path, &st) == 0 else { complain("\(path): \(String(cString: strerror(errno)))"); exit(1) }
    if (st.st_mode & S_IFMT) == S_IFDIR {
        guard let dir = opendir(path) else { complain("\(path): cannot read"); exit(1) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if !name.hasPrefix(".") { names.append(path + "/" + name) }
        }
        closedir(dir)
        inputs += names.sorted()
    } else {
        inputs.append(path)
    }
}
for path in inputs {
    guard let file = fopen(path, "rb") else { complain("\(path): \(String(cString: strerror(errno)))"); exit(1) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, file)
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    fclose(file)
    target.run(bytes)
}
print("\(target.rawValue): \(inputs.count) inputs replayed")
#endif
