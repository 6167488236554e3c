import FarcastSupport
import Foundation
@testable import Sendspin
import Testing

@Suite struct PlayerStoreTests {
    @Test func identityIsCreatedOnceAndKeptPrivate() throws {
        let folder = NSTemporaryDirectory() + "farcast-store-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = PlayerStore(directory: StateDirectory(path: folder))
        let first = try store.identity()
        let again = try store.identity()
        #expect(first.rawRepresentation == again.rawRepresentation)
        #expect(try StateDirectory(path: folder).permissions(of: "sendspin/identity.key") == 0o600)
        // A damaged key file is an error that says what to do, not a silent new identity.
        try StateDirectory(path: folder).write([1, 2, 3], to: "sendspin/identity.key")
        #expect(throws: StateDirectoryError.self) { try store.identity() }
    }

    @Test func settingsRoundTripAndDefaultWhenMissing() throws {
        let folder = NSTemporaryDirectory() + "farcast-store-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = PlayerStore(directory: StateDirectory(path: folder))
        #expect(store.settings() == PlayerStore.Settings())
        var settings = PlayerStore.Settings()
        settings.volume = 35
        settings.muted = true
        settings.outputDelayMs = 120
        try store.save(settings)
        #expect(store.settings() == settings)
    }
}

@Suite struct FramingTests {
    @Test func smallMessagesAreNotFragmentedLargeOnesAre() {
        #expect(SendspinFraming.plaintexts(type: 0, body: [1, 2, 3]) == [[0, 1, 2, 3]])
        let body = [UInt8](repeating: 7, count: 200_000)
        let frames = SendspinFraming.plaintexts(type: 4, body: body)
        #expect(frames.count == 4)
        #expect(frames.allSatisfy { $0.count <= SendspinFraming.maximumPlaintext })
        #expect(Array(frames[0].prefix(3)) == [1, 0x02, 4])
        #expect(Array(frames[3].prefix(2)) == [1, 0x01])
        var reassembler = FragmentReassembler()
        var result: (type: UInt8, body: [UInt8])?
        for f in frames { result = try? reassembler.accept(f) }
        #expect(result?.type == 4 && result?.body == body)
    }

    @Test func anOversizedReassemblyIsRefused() throws {
        var reassembler = FragmentReassembler()
        let chunk = [UInt8](repeating: 0, count: 65_000)
        _ = try reassembler.accept([1, 0x02, 0] + chunk)
        var refused = false
        for _ in 0..<2000 {
            do { _ = try reassembler.accept([1, 0x00] + chunk) } catch {
                refused = true
                break
            }
        }
        #expect(refused, "a 64 MiB+ message must be refused")
    }
}
