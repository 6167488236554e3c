import Crypto
import FarcastSupport
import Foundation
@testable import Sendspin
import Testing

/// The Pairing-PSK method's pieces: the token (the specification's own vector), PSK lookup,
/// storage. The flow against aiosendspin's server is in IntegrationTests/SendspinPairingTests.
@Suite struct PairingTests {
    @Test func tokenMatchesTheSpecificationVector() {
        let token = PairingToken.encode(clientKey: Array(0..<32), pairingPSK: Array(0xE0...0xFF))
        #expect(token == "SP:0AAAQEAYEAUDAOCAJBIFQYDIOB4IBCEQTCQKRMFYYDENBWHA5DYP6BYPC4PSOLZXH5DU6V97M5XXO74HR6LZ7J5PW674PT6X37T6757Y")
        #expect(SendspinPSK.identifier(of: Array(0xE0...0xFF)) == "6JvkxqvATBX2x3WV9YLaVi79xjAQxo9YDSmygNm12QY")
    }

    @Test func aLongTermPSKAnswersOnlyForItsServer() {
        let psk = [UInt8](repeating: 7, count: 32)
        var credentials = PairingCredentials(pairingPSK: Array(0xE0...0xFF))
        credentials.add(PairedServer(psk: psk, serverID: "server-a"))
        let id = SendspinPSK.identifier(of: psk)
        #expect(credentials.psk(category: "lt", id: id, serverID: "server-a") == psk)
        #expect(credentials.psk(category: "lt", id: id, serverID: "server-b") == nil)
        #expect(credentials.psk(category: "pr", id: "6JvkxqvATBX2x3WV9YLaVi79xjAQxo9YDSmygNm12QY", serverID: nil) == Array(0xE0...0xFF))
        #expect(credentials.psk(category: "pr", id: "someone-else", serverID: nil) == nil)
        // A newer pairing with the same server replaces the old one.
        credentials.add(PairedServer(psk: [UInt8](repeating: 8, count: 32), serverID: "server-a"))
        #expect(credentials.servers.count == 1 && credentials.servers[0].pskBytes == [UInt8](repeating: 8, count: 32))
    }

    @Test func theStoreKeepsThePairingPSKAndRecordsPrivate() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("farcast-pairing-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = PlayerStore(directory: StateDirectory(path: folder))
        let psk = try store.pairingPSK()
        let again = try store.pairingPSK()
        #expect(psk.count == 32 && again == psk, "created once, then reused")
        #expect(try store.pairingToken().hasPrefix("SP:0"))
        try store.remember(PairedServer(psk: [UInt8](repeating: 1, count: 32), serverID: "s1"))
        #expect(store.pairedServers().map(\.serverID) == ["s1"])
        let mode = try FileManager.default.attributesOfItem(atPath: folder + "/sendspin/paired-servers.json")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let forgotten = try store.forget(serverID: "s1")
        #expect(forgotten && store.pairedServers().isEmpty)
    }
}
