import XCTest
@testable import SIP

extension ProtocolCheckTests {
    /// The CSeq method must match for an INVITE too, not only for the methods that usually
    /// carry another one (a mutant exempting INVITE survived every other test).
    func testCSeqMethodMismatchOfAnInviteIs400() {
        XCTAssertEqual(request(method: "INVITE", cseqMethod: "OPTIONS").protocolRejection()?.statusCode, 400)
        XCTAssertEqual(request(method: "INVITE", cseqMethod: "invite").protocolRejection()?.statusCode, 400, "methods are case-sensitive")
        XCTAssertEqual(request(method: "BYE", cseqMethod: "INVITE").protocolRejection()?.statusCode, 400)
    }
}
