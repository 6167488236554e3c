import Foundation
import Testing
@testable import Jellyfin

struct JellyfinDateTranscoderTests {
    let transcoder = JellyfinDateTranscoder()

    @Test func readsSevenDigitFractionsAsJellyfinWritesThem() throws {
        let date = try transcoder.decode("1999-11-24T00:00:00.0000000Z")
        #expect(date.timeIntervalSince1970 == 943_401_600)
        let precise = try transcoder.decode("2024-11-21T21:04:49.1234567Z")
        #expect(abs(precise.timeIntervalSince1970 - 1_732_223_089.1234567) < 1e-6)
    }

    @Test func readsThreeDigitFractions() throws {
        let date = try transcoder.decode("2024-11-21T21:04:49.250Z")
        #expect(abs(date.timeIntervalSince1970 - 1_732_223_089.25) < 1e-9)
    }

    @Test func readsDatesWithoutAFraction() throws {
        #expect(try transcoder.decode("2024-11-21T21:04:49Z").timeIntervalSince1970 == 1_732_223_089)
    }

    @Test func readsOffsetsAndDatesWithoutAZone() throws {
        #expect(try transcoder.decode("2024-11-21T22:04:49+01:00").timeIntervalSince1970 == 1_732_223_089)
        #expect(try transcoder.decode("2024-11-21T16:04:49-0500").timeIntervalSince1970 == 1_732_223_089)
        // No zone: .NET's DateTime with Kind Unspecified, read as UTC.
        #expect(try transcoder.decode("2024-11-21T21:04:49.0000000").timeIntervalSince1970 == 1_732_223_089)
    }

    @Test func writesSevenDigitsInUTC() throws {
        #expect(try transcoder.encode(Date(timeIntervalSince1970: 1_732_223_089.5)) == "2024-11-21T21:04:49.5000000Z")
        #expect(try transcoder.encode(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.0000000Z")
        #expect(try transcoder.encode(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.0000000Z")
    }

    @Test func roundTripsAcrossCenturiesAndLeapDays() throws {
        for text in ["2000-02-29T12:00:00.0000000Z", "1900-03-01T00:00:00.0000000Z", "2100-12-31T23:59:59.0000000Z", "0001-01-01T00:00:00.0000000Z"] {
            #expect(try transcoder.encode(transcoder.decode(text)) == text)
        }
    }

    @Test func refusesWhatIsNotADate() {
        for text in ["", "2024-11-21", "2024-13-01T00:00:00Z", "2024-11-21T25:00:00Z", "2024-11-21T21:04:49.Z", "2024-11-21T21:04:49Zjunk",
                     "yesterday", "2024-11-21T21:04:49+5"] {
            #expect(throws: JellyfinDateError.self) { try transcoder.decode(text) }
        }
    }
}
