import FarcastNIO
import Logging
import NIOPosix
@testable import Sendspin
import Synchronization
import Testing

/// `Runtime`'s client/time exchanges: the t1 that reaches the clock filter is the moment the
/// writer handed the request to the connection, not the earlier moment sealed in the request
/// (the wait for the writer's turn is not network delay). The writer here is the test: it notes
/// the write and answers as the server would; the real connection's writer runs in every
/// Sendspin integration test.
struct PlayerRuntimeTests {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// An active legacy-wire runtime (its frames are clear JSON, so the test reads them) and its writer queue.
    /// Everything runs on the runtime's loop, as in a connection (a writer on the shared pool
    /// could wait past the exchange's 1 s deadline while the other suites keep the pool busy).
    private func activeRuntime() -> (Runtime, OrderedWriter<Runtime.Outgoing>, EventLoopExecutor) {
        let session = LegacySessionTests.session()
        let runtime = Runtime(session: session, core: PlayerCore(settings: .init()), logger: Logger(label: "test"),
                              visualization: VisualizationLedger())
        let frames = OrderedWriter<Runtime.Outgoing>()
        let executor = EventLoopExecutor(group.next())
        runtime.attach(frames, executor: executor)
        runtime.perform(runtime.withSession { $0.start() }, now: 0)
        runtime.perform(runtime.withSession { $0.receive(.text(LegacySessionTests.hello), at: 10) }, now: 10)
        return (runtime, frames, executor)
    }

    private static func answer(to t1: Int64, received t2: Int64, sent t3: Int64) -> String {
        #"{"type":"server/time","payload":{"client_transmitted":\#(t1),"server_received":\#(t2),"server_transmitted":\#(t3)}}"#
    }

    @Test func theExchangeCountsFromWhenTheRequestLeftNotWhenItWasSealed() async throws {
        let (runtime, frames, executor) = activeRuntime()
        let tagged = Mutex<[Int64]>([])
        let writer = Task(executorPreference: executor) {
            try await frames.run { outgoing in
                guard let key = outgoing.timeExchange else { return }
                tagged.withLock { $0.append(key) }
                // Written 700 µs after t1 was read; the server answers at once.
                runtime.timeRequestSent(key, at: key + 700)
                runtime.perform(runtime.withSession { $0.receive(.text(Self.answer(to: key, received: key + 760, sent: key + 770)), at: key + 830) },
                                now: key + 830)
            }
        }
        let answer = try #require(await withTaskExecutorPreference(executor) { await runtime.exchangeTime(t1: 1_000, now: 1_000) })
        #expect(answer.server.clientTransmitted == 1_000)
        #expect(answer.sent == 1_700 && answer.received == 1_830)
        #expect(tagged.withLock { $0 } == [1_000])
        // On the loop's 60 µs each way, the offset is 0; from the sealed t1 it would be 350 µs.
        let exchange = TimeSyncSchedule.Exchange(t1: answer.sent, t2: answer.server.serverReceived, t3: answer.server.serverTransmitted, t4: answer.received)
        #expect(TimeFilter.measurement(t1: exchange.t1, t2: exchange.t2, t3: exchange.t3, t4: exchange.t4).offset == 0)
        runtime.end(nil)
        try await writer.value
        try await group.shutdownGracefully()
    }

    @Test func anAnswerBeforeTheWriteIsNotedFallsBackToTheSealedTime() async throws {
        let (runtime, frames, executor) = activeRuntime()
        let writer = Task(executorPreference: executor) {
            try await frames.run { outgoing in
                guard let key = outgoing.timeExchange else { return }
                runtime.perform(runtime.withSession { $0.receive(.text(Self.answer(to: key, received: key + 50, sent: key + 60)), at: key + 100) },
                                now: key + 100)
                runtime.timeRequestSent(key, at: key + 500)
            }
        }
        let answer = try #require(await withTaskExecutorPreference(executor) { await runtime.exchangeTime(t1: 2_000, now: 2_000) })
        #expect(answer.sent == 2_000 && answer.received == 2_100)
        runtime.end(nil)
        try await writer.value
        try await group.shutdownGracefully()
    }
}
