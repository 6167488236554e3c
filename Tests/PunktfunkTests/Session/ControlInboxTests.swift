@testable import Punktfunk
import Testing

struct ControlInboxTests {
    static func framed(_ messages: [ControlMessage]) -> [UInt8] {
        messages.flatMap { ControlFrameDecoder.frame($0.encoded()) }
    }

    @Test func aWaitTakesTheFirstMatchAndLeavesTheRestQueued() async throws {
        let inbox = ControlInbox()
        inbox.deliver(Self.framed([.bitrateChanged(kbps: 5), .clockEcho(t1: 1, t2: 2, t3: 3), .requestKeyframe]))
        let echo = try await inbox.next(timeout: .seconds(1), waitingFor: "echo") { ControlMessage.isControl($0) && $0[4] == 0x31 }
        #expect(try ControlMessage.decode(echo) == .clockEcho(t1: 1, t2: 2, t3: 3))
        #expect(try ControlMessage.decode(try await inbox.next(timeout: .seconds(1), waitingFor: "any")) == .bitrateChanged(kbps: 5))
        #expect(try ControlMessage.decode(try await inbox.next(timeout: .seconds(1), waitingFor: "any")) == .requestKeyframe)
    }

    @Test func aWaiterIsWokenByBytesThatArriveLaterInPieces() async throws {
        let inbox = ControlInbox()
        let bytes = Self.framed([.pairResult(ok: true)])
        Task {
            try await Task.sleep(nanoseconds: 20_000_000)
            inbox.deliver(Array(bytes.prefix(3)))
            inbox.deliver(Array(bytes.dropFirst(3)))
        }
        #expect(try ControlMessage.decode(try await inbox.next(timeout: .seconds(5), waitingFor: "result")) == .pairResult(ok: true))
    }

    @Test func waitsTimeOutAndFailuresReachEveryWaiter() async throws {
        let inbox = ControlInbox()
        await #expect(throws: PunktfunkSessionError.timeout(waitingFor: "Welcome", seconds: 0.05)) {
            _ = try await inbox.next(timeout: .milliseconds(50), waitingFor: "Welcome")
        }
        Task {
            try await Task.sleep(nanoseconds: 20_000_000)
            inbox.fail(.idleTimeout(seconds: 8))
        }
        await #expect(throws: PunktfunkSessionError.idleTimeout(seconds: 8)) {
            _ = try await inbox.next(timeout: .seconds(5), waitingFor: "anything")
        }
        await #expect(throws: PunktfunkSessionError.idleTimeout(seconds: 8)) {
            _ = try await inbox.next(timeout: .seconds(5), waitingFor: "anything")
        }
    }

    @Test func aFloodingHostEndsTheInboxInsteadOfGrowingIt() async throws {
        let inbox = ControlInbox()
        let big = ControlFrameDecoder.frame([UInt8](repeating: 0x41, count: 65_000))
        for _ in 0..<70 { inbox.deliver(big) }
        #expect(inbox.failure != nil)
        await #expect(throws: PunktfunkSessionError.self) { _ = try await inbox.next(timeout: .seconds(1), waitingFor: "x") }
    }
}
