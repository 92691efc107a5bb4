@_exported import TestSupport
import XCTest
import TextFormats

/// Test text as bytes; each U+FFFD in the literal becomes the invalid UTF-8
/// byte 0xFF, so bad input stays readable in tables.
func bytes(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    for scalar in text.unicodeScalars {
        if scalar == "\u{FFFD}" {
            out.append(0xFF)
        } else {
            out.append(contentsOf: Array(String(scalar).utf8))
        }
    }
    return out
}

/// Runs `body`, which must throw a `TextFormatError`, and returns it.
func captureError(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> TextFormatError? {
    do {
        try body()
        XCTFail("expected a TextFormatError, got success", file: file, line: line)
    } catch let error as TextFormatError {
        return error
    } catch {
        XCTFail("expected a TextFormatError, got \(error)", file: file, line: line)
    }
    return nil
}
