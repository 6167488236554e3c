@testable import FarcastNIO
import FarcastSupport
import Testing

/// TLS failures classified by code: BoringSSL's packed error codes (library << 24 | reason; a
/// received alert is reason 1000 + its number) decoded from the error-queue entries as
/// swift-nio-ssl describes them. The strings are the format it prints (its numeric code is
/// private, so no error object can be built here); the x11vnc client-certificate test in
/// VNCSecurityChoiceTests drives the same path with a real server's alerts.
struct TLSFailureTests {
    @Test func aReceivedAlertIsTypedByNumber() throws {
        let reason = try #require(TLSFailure.reason(describedAs:
            "Error: 268436572 error:1000045c:SSL routines:OPENSSL_internal:TLSV1_ALERT_CERTIFICATE_REQUIRED at /src/ssl/tls_record.cc:592"))
        #expect(reason.code == 0x1000_045C)
        #expect(reason.peerAlert == .certificateRequired)
        #expect(reason.words == "tlsv1 alert certificate required")
        #expect(TLSAlert.clientCertificateMissing.contains(reason.peerAlert!))

        let unknownCA = try #require(TLSFailure.reason(describedAs: "Error: 268436504 error:10000418:SSL routines:OPENSSL_internal:TLSV1_ALERT_UNKNOWN_CA at x.cc:1"))
        #expect(unknownCA.peerAlert == .unknownCA)
        #expect("\(unknownCA.peerAlert!)" == "unknown ca")
    }

    @Test func aLocalFailureIsNoAlert() throws {
        let reason = try #require(TLSFailure.reason(describedAs: "Error: 268435612 error:1000009c:SSL routines:OPENSSL_internal:HTTP_REQUEST at /src/ssl/tls_record.cc:253"))
        #expect(reason.peerAlert == nil)
        #expect(reason.words == "http request")
        // Another library's reason 1040 is not an alert either.
        let other = try #require(TLSFailure.reason(describedAs: "Error: 100664336 error:06000410:x:y:SOMETHING at z:1"))
        #expect(other.peerAlert == nil)
    }

    @Test func descriptionsThatAreNotQueueEntriesGiveNothing() {
        #expect(TLSFailure.reason(describedAs: "synthetic failure") == nil)
        #expect(TLSFailure.reason(describedAs: "Error:  at") == nil)
        #expect(TLSFailure(CancellationError()) == nil)
        // A code with no readable reason text still says which.
        #expect(TLSFailure.reason(describedAs: "Error: 268435612 ")?.words == "reason 156")
    }

    @Test func alertsWithoutANameSayTheirNumber() {
        #expect("\(TLSAlert(rawValue: 90))" == "alert 90")
        #expect(TLSAlert.clientCertificateRefused.contains(.badCertificate))
        #expect(!TLSAlert.clientCertificateRefused.contains(.noApplicationProtocol))
    }
}
