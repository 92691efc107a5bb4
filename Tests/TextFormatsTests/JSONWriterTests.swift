import Foundation
import TextFormats
import XCTest

/// The one JSON writer every document and `--json` output comes from.
final class JSONWriterTests: XCTestCase {
    func testJSONWriterNestsQuotesAndEscapes() throws {
        var w = JSONWriter()
        w.beginObject()
        w.field("name", "<img src=x onerror=\"alert(1)\"> & \u{1}\n")
        w.key("list")
        w.beginArray()
        w.number(1)
        w.beginObject()
        w.field("empty", nil as String?)
        w.field("yes", true)
        w.endObject()
        w.beginArray()
        w.endArray()
        w.endArray()
        let invalid: [UInt8] = [0x61, 0xFF, 0xC3, 0xA9]
        w.key("bytes")
        invalid.withUnsafeBytes { w.string($0) }
        w.field("n", UInt64.max)
        w.endObject()
        let text = String(decoding: w.bytes, as: UTF8.self)
        XCTAssertEqual(text, #"{"name":"\u003cimg src=x onerror=\"alert(1)\"\u003e \u0026 \u0001\n","list":[1,{"empty":null,"yes":true},[]],"#
                       + #""bytes":"a�é","n":18446744073709551615}"#)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [String: Any])
        XCTAssertEqual(object["name"] as? String, "<img src=x onerror=\"alert(1)\"> & \u{1}\n")
    }
}
