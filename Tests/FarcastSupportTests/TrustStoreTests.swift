import FarcastSupport
import Testing

@Suite struct TrustStoreTests {
    @Test func pinsOnFirstUseThenMatchesThenRefusesAChange() throws {
        let scratch = ScratchFolder()
        let store = TrustStore(directory: StateDirectory(path: scratch.path), fileName: "vnc/pins.json")
        #expect(try store.pin(for: "h:5900") == nil)
        #expect(try store.check(peer: "h:5900", fingerprint: "AA11", acceptChange: false) == .pinnedOnFirstUse)
        #expect(try store.check(peer: "h:5900", fingerprint: "aa11", acceptChange: false) == .matchesPin)
        #expect(try store.check(peer: "h:5900", fingerprint: "bb22", acceptChange: false) == .mismatch(pinned: "aa11"))
        #expect(try store.pin(for: "h:5900") == "aa11", "a refused change leaves the pin alone")
        #expect(try store.check(peer: "h:5900", fingerprint: "bb22", acceptChange: true) == .replacedPin(previous: "aa11"))
        #expect(try store.pin(for: "h:5900") == "bb22")
        // Other peers are independent, and the file is private.
        #expect(try store.check(peer: "other:1", fingerprint: "cc", acceptChange: false) == .pinnedOnFirstUse)
        #expect(try StateDirectory(path: scratch.path).permissions(of: "vnc/pins.json") == 0o600)
        try store.remove(peer: "h:5900")
        #expect(try store.pin(for: "h:5900") == nil)
        #expect(try store.pin(for: "other:1") == "cc")
    }

    @Test func evaluateDecidesWithoutPinningAndRecordPins() throws {
        let scratch = ScratchFolder()
        let store = TrustStore(directory: StateDirectory(path: scratch.path), fileName: "vnc/pins.json")
        #expect(try store.evaluate(peer: "h:5900", fingerprint: "AA11", acceptChange: false) == .pinnedOnFirstUse)
        #expect(try store.pin(for: "h:5900") == nil, "evaluating wrote nothing")
        try store.record(peer: "h:5900", fingerprint: "AA11")
        #expect(try store.pin(for: "h:5900") == "aa11")
        #expect(try store.evaluate(peer: "h:5900", fingerprint: "bb22", acceptChange: false) == .mismatch(pinned: "aa11"))
        #expect(try store.evaluate(peer: "h:5900", fingerprint: "bb22", acceptChange: true) == .replacedPin(previous: "aa11"))
        #expect(try store.pin(for: "h:5900") == "aa11", "still the old pin until recorded")
    }

    @Test func aCorruptPinFileIsAnErrorNotASilentReset() throws {
        let scratch = ScratchFolder()
        let dir = StateDirectory(path: scratch.path)
        try dir.write(Array("{not json".utf8), to: "pins.json")
        let store = TrustStore(directory: dir, fileName: "pins.json")
        #expect(throws: StateDirectoryError.self) { try store.check(peer: "h", fingerprint: "aa", acceptChange: false) }
    }

    @Test func hexIsLowercase() {
        #expect(hexString([0x00, 0xAB, 0x7F]) == "00ab7f")
    }
}
