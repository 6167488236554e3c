import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGINT and SIGTERM for the whole process, routed by one policy (docs/cli.md):
/// - by default a signal cancels the running command, which stops within a second and exits 1
///   saying it was interrupted;
/// - a command that runs until stopped (`sendspin play`, `listen`, `daemon`…) registers a
///   `SignalWatcher`, whose handler stops it gracefully instead; it then exits 0;
/// - either way a watchdog ends the process if it has not exited a second after the signal, and a
///   second signal ends it at once.
enum Signals {
    private struct State {
        var task: Task<Void, any Error>?
        var handler: (@Sendable (Int32) -> Void)?
        var received: Int32?
    }
    private static let state = Mutex(State())
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    /// How long after a signal the process may take to exit before the watchdog ends it.
    static let grace: DispatchTimeInterval = .milliseconds(1000)

    /// Called first thing in `main`: take SIGINT/SIGTERM over from the default action (and
    /// unblock them, in case a parent started us with them blocked).
    static func install() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { deliver(number) }
            source.resume()
            sources.append(source)
        }
    }

    /// The task running the command, cancelled by a signal when no handler is registered.
    static func commandStarted(_ task: Task<Void, any Error>) {
        state.withLock { $0.task = task }
    }

    /// The signal that interrupted the command, if one did.
    static var received: Int32? { state.withLock { $0.received } }

    fileprivate static func register(_ handler: @escaping @Sendable (Int32) -> Void) {
        state.withLock { $0.handler = handler }
    }

    fileprivate static func unregister() {
        state.withLock { $0.handler = nil }
    }

    private static func deliver(_ number: Int32) {
        let (first, handler, task) = state.withLock { s -> (Bool, (@Sendable (Int32) -> Void)?, Task<Void, any Error>?) in
            let first = s.received == nil
            if first { s.received = number }
            return (first, s.handler, s.task)
        }
        guard first else {
            FileHandleOutput.stderr("farcast: \(name(number)) again: stopping now\n")
            exit(1)
        }
        if let handler {
            handler(number)
        } else {
            task?.cancel()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + grace) {
            FileHandleOutput.stderr("farcast: interrupted by \(name(number)); it did not stop within \(grace.seconds) s, so it was ended\n")
            exit(handler == nil ? 1 : 0)
        }
    }

    static func name(_ number: Int32) -> String { number == SIGTERM ? "SIGTERM" : number == SIGINT ? "SIGINT" : "signal \(number)" }
}

private extension DispatchTimeInterval {
    var seconds: String {
        if case .milliseconds(let ms) = self { return ms % 1000 == 0 ? "\(ms / 1000)" : String(format: "%.1f", Double(ms) / 1000) }
        return "1"
    }
}

/// A command's own answer to SIGINT and SIGTERM (a graceful stop, e.g. saying goodbye to a
/// server) for as long as the watcher lives; `cancel()` restores the default (cancel the
/// command).
final class SignalWatcher: Sendable {
    init(_ handler: @escaping @Sendable (Int32) -> Void) {
        Signals.register(handler)
    }

    func cancel() {
        Signals.unregister()
    }
}
