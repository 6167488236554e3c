import Foundation
@testable import Sendspin
import Testing

/// The fast server/time reader must agree with the general JSON path on every document it
/// accepts, and leave everything unusual to that path.
struct ServerTimeReaderTests {
    /// What the general path makes of a document: the envelope's type and, for server/time, the
    /// payload; nil when it rejects it.
    private func general(_ text: [UInt8]) -> (type: String, time: ServerTime?)? {
        struct Envelope: Decodable { var type: String; var payload: ServerTime? }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: Data(text)) else { return nil }
        return (envelope.type, envelope.payload)
    }

    @Test func readsBothKeyOrdersAndWhitespaceAsTheDecoderDoes() throws {
        let documents = [
            // aiosendspin's order: payload first.
            #"{"payload":{"client_transmitted":1000000,"server_received":51000250,"server_transmitted":51000300},"type":"server/time"}"#,
            #"{"type":"server/time","payload":{"server_transmitted":3,"client_transmitted":-1,"server_received":2}}"#,
            " {\n\t\"type\" : \"server/time\" ,\r\n \"payload\" : { \"client_transmitted\" : 0 , \"server_received\" : 999999999999999999 , \"server_transmitted\" : 7 } } \n",
        ]
        for document in documents {
            let bytes = Array(document.utf8)
            let fast = try #require(ServerTimeReader.read(bytes), "\(document)")
            let slow = try #require(general(bytes))
            #expect(slow.type == "server/time" && slow.time == fast, "\(document)")
            #expect(try WireJSON.messageType(of: bytes) == "server/time")
            #expect(try WireJSON.decode(ServerTime.self, from: bytes) == fast)
        }
    }

    @Test func leavesAnythingUnusualToTheGeneralPath() {
        let declined = [
            #"{"type":"server\/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}}"#,   // an escape
            #"{"type":"server/time","payload":{"client_transmitted":1.0,"server_received":2,"server_transmitted":3}}"#,  // a fraction
            #"{"type":"server/time","payload":{"client_transmitted":1e3,"server_received":2,"server_transmitted":3}}"#,  // an exponent
            #"{"type":"server/time","payload":{"client_transmitted":01,"server_received":2,"server_transmitted":3}}"#,   // a leading zero
            #"{"type":"server/time","payload":{"client_transmitted":-0,"server_received":2,"server_transmitted":3}}"#,   // minus zero
            #"{"type":"server/time","payload":{"client_transmitted":1234567890123456789,"server_received":2,"server_transmitted":3}}"#,
            #"{"type":"server/time","payload":{"client_transmitted":1,"server_received":2}}"#,                          // a key missing
            #"{"type":"server/time","payload":{"client_transmitted":1,"client_transmitted":1,"server_received":2,"server_transmitted":3}}"#,
            #"{"type":"server/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3,"extra":4}}"#,
            #"{"type":"server/time","type":"server/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}}"#,
            #"{"type":"server/state","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}}"#,
            #"{"type":"server/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}} x"#,
            #"{"type":"server/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}"#,
            #"{"type":"server/time"}"#,
            "",
        ]
        for document in declined {
            #expect(ServerTimeReader.read(Array(document.utf8)) == nil, "\(document)")
        }
    }

    /// Random edits of valid answers (a byte changed, inserted, removed, the text cut short):
    /// whatever the reader accepts, the decoder reads as the same server/time.
    @Test func agreesWithTheDecoderOnEditedDocuments() {
        var generator = SystemRandomNumberGenerator()
        let seeds = [
            Array(#"{"payload":{"client_transmitted":1000000,"server_received":51000250,"server_transmitted":51000300},"type":"server/time"}"#.utf8),
            Array(#"{ "type": "server/time", "payload": { "server_received": -5, "client_transmitted": 42, "server_transmitted": 9 } }"#.utf8),
        ]
        let alphabet = Array(#"{}[]:,"\ -+.0123456789eEtrunfalsype/_"#.utf8) + [0x00, 0x09, 0x0A, 0x7F, 0xC3, 0xFF]
        var accepted = 0
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: bytes[at] = alphabet.randomElement(using: &generator)!
                case 1: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
                case 2: if bytes.count > 1 { bytes.remove(at: at) }
                default: bytes = Array(bytes[..<at])
                }
                if bytes.isEmpty { break }
            }
            guard let fast = ServerTimeReader.read(bytes) else { continue }
            accepted += 1
            let slow = general(bytes)
            #expect(slow?.type == "server/time" && slow?.time == fast, "\(String(decoding: bytes, as: UTF8.self))")
        }
        // Edits that keep an answer valid (a digit for a digit, a space added) are accepted.
        #expect(accepted > 100, "accepted \(accepted) of 20,000 edited documents")
    }
}

/// The hand-written client/time request is the document the encoder makes for the same value
/// (the encoder's key order varies from run to run, so the documents are compared, not the text).
struct ClientTimeTextTests {
    @Test(arguments: [Int64(0), 1, -1, 42, 1_000_000, Int64.max, Int64.min])
    func isTheEncodersDocument(_ value: Int64) throws {
        func document(_ text: String) throws -> NSDictionary {
            try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSDictionary)
        }
        let ours = try document(WireJSON.clientTime(value))
        #expect(ours == (try document(WireJSON.encode(type: "client/time", payload: ClientTime(clientTransmitted: value)))))
        #expect(ours["type"] as? String == "client/time")
    }
}
