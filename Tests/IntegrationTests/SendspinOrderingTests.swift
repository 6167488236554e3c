import Foundation
import Logging
import Sendspin
import Synchronization
import Testing

/// One ordered writer per connection: two threads send controller commands through one player as
/// fast as they can while the player runs its own traffic (client/time bursts, client/state), and
/// aiosendspin 10.2.1 must receive every message, each thread's in its order, with the session up.
/// Noise transport nonces count up per message, so a frame that left out of the order it was
/// sealed in fails authentication at the server and ends the session.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct SendspinOrderingTests {
    static let perThread = 10_000

    @Test func concurrentSendersReachTheServerInOrderWithTheSessionUp() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinRecordingServer(folder: folder.path)
        var options = SendspinPlayer.Options()
        options.name = "farcast-ordering"
        options.duration = .seconds(150)
        let player = SendspinPlayer(options: options)
        let playing = Task { try await player.play(url: server.url, sink: NullSink(), logger: Logger(label: "test")) }

        // Active once the player reported its state after the server's activation.
        let activeBy = ContinuousClock.now + .seconds(60)
        while !server.received.contains("client/state") {
            guard ContinuousClock.now < activeBy else {
                playing.cancel()
                Issue.record("the session never became active: \(server.received.suffix(10)); server log: \(server.process.log.suffix(2000))")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }

        // Two threads (not tasks: the cooperative pool would run them one after the other on a
        // small machine) released at once, each sending its own numbered seeks.
        let refused = Mutex(0)
        let finished = DispatchGroup()
        let start = DispatchSemaphore(value: 0)
        for base in [0, 1_000_000] {
            finished.enter()
            Thread {
                start.wait()
                for i in 0..<Self.perThread where !player.send(ControllerCommand(command: "seek", positionMs: Int64(base + i))) {
                    refused.withLock { $0 += 1 }
                }
                finished.leave()
            }.start()
        }
        start.signal()
        start.signal()
        await withCheckedContinuation { continuation in finished.notify(queue: .global()) { continuation.resume() } }
        #expect(refused.withLock { $0 } == 0, "send refused \(refused.withLock { $0 }) commands: the session was not active")

        // Everything the server has decrypted, until all commands are in or the session ended.
        let arrivedBy = ContinuousClock.now + .seconds(90)
        func commands() -> [Int] {
            server.received.compactMap { line in
                line.hasPrefix("client/command seek ") ? Int(line.split(separator: " ")[2]) : nil
            }
        }
        while commands().count < 2 * Self.perThread && !server.received.contains(where: { $0.hasPrefix("closed:") }) && ContinuousClock.now < arrivedBy {
            try await Task.sleep(for: .milliseconds(200))
        }
        player.stop()
        let report = try await playing.value
        // The goodbye is the last thing the server reads; give it its flush interval.
        let goodbyeBy = ContinuousClock.now + .seconds(10)
        while !server.received.contains(where: { $0.hasPrefix("client/goodbye") }) && ContinuousClock.now < goodbyeBy {
            try await Task.sleep(for: .milliseconds(100))
        }

        let received = server.received
        let seeks = commands()
        let first = seeks.filter { $0 < 1_000_000 }, second = seeks.filter { $0 >= 1_000_000 }
        #expect(!received.contains { $0.hasPrefix("closed:") }, "the server dropped the session: \(received.filter { $0.hasPrefix("closed:") })")
        #expect(seeks.count == 2 * Self.perThread, "the server received \(seeks.count) of \(2 * Self.perThread) commands")
        #expect(first == Array(0..<Self.perThread), "the first thread's commands arrived out of order or incomplete (\(first.count))")
        #expect(second == Array(1_000_000..<(1_000_000 + Self.perThread)), "the second thread's commands arrived out of order or incomplete (\(second.count))")
        // The two threads really raced: their commands are interleaved, not one block after the other.
        let switches = zip(seeks, seeks.dropFirst()).filter { ($0 < 1_000_000) != ($1 < 1_000_000) }.count
        #expect(switches > 1, "the senders never overlapped (\(switches) switches); the test proved nothing about concurrency")
        // The session stayed up: time exchanges went on around the commands, and it ended with
        // our goodbye, not a failure.
        #expect(report.endReason == nil, "the session ended with \(report.endReason ?? "")")
        #expect(received.last.map { $0.hasPrefix("client/goodbye") } == true, "the last message was \(received.last ?? "nothing")")
        #expect(received.filter { $0 == "client/time" }.count > 8, "the player's own clock traffic went on")
        print("ordering: \(seeks.count) commands, \(switches) switches between the two senders, \(received.count) messages in all")
    }
}
