import Foundation
import Synchronization
#if canImport(CSDL2Loader)
import CSDL2Loader
#endif

/// Why a viewer window could not open.
public enum ViewerError: Error, Sendable, CustomStringConvertible {
    case noDisplay(String)
    case sdl(String)
    case unavailable
    /// SDL2 or SDL2_ttf could not be loaded when the window was to open (they are loaded then,
    /// not at start-up).
    case libraryMissing(String)

    public var description: String {
        switch self {
        case .noDisplay(let detail):
            return "cannot open a window: \(detail) (run it in a desktop session, or set DISPLAY to an X server such as Xvfb's)"
        case .sdl(let detail): return "the window system failed: \(detail)"
        case .unavailable: return "this build has no window support (SDL2 is needed; on Debian: apt install libsdl2-dev libsdl2-ttf-dev)"
        case .libraryMissing(let detail):
            return "cannot load SDL2 for the window: \(detail) (on Debian: apt install libsdl2-2.0-0 libsdl2-ttf-2.0-0)"
        }
    }
}

extension ViewerWindow {
    /// Loads SDL2 and SDL2_ttf as opening a window would, without opening one: what
    /// `farcast doctor` checks.
    public static func loadLibraries() throws(ViewerError) {
        #if canImport(CSDL2Loader)
        if let problem = farcast_sdl_load() { throw .libraryMissing(String(cString: problem)) }
        #else
        throw .unavailable
        #endif
    }
}

/// A window showing a remote picture and collecting the person's input: the presentation layer
/// every farcast viewer shares (VNC now; punktfunk's stream next).
///
/// The protocol side stages changed rectangles into `frames` and calls `wake()` (a remote
/// desktop), or hands over whole decoded pictures with `show` (a video stream); it hands over
/// the cursor shape, clipboard text, monitors and connection state with the setters below, all
/// callable from any thread. The window runs on its own thread (`run()` blocks until it closes)
/// and reports what the person does through `input`, in order, in remote coordinates.
public final class ViewerWindow: Sendable {
    public let configuration: ViewerConfiguration
    /// Changed pixels, from the protocol side to the window.
    public let frames = FrameStaging()
    /// Whole YUV pictures (a video stream's), from the protocol side to the window (`show`).
    let pictures = PictureSlot()
    /// What the person did, in order; ends with `.closed`.
    public let input: AsyncStream<ViewerInput>
    let inputSink: AsyncStream<ViewerInput>.Continuation

    struct Shared {
        var cursor: ViewerCursor?
        var cursorChanged = false
        var clipboard: String?
        var status: ViewerStatus?
        var screens: [ViewerRect]?
        var closeRequested = false
        /// A question for the person (`ask`), until the window takes it.
        var question: Question?
        /// Feedback for pads, until the window plays it.
        var padFeedback: [(pad: Int32, feedback: ViewerPadFeedback)] = []
        var statistics = ViewerStatistics(framesPresented: 0, updates: 0, latencyP50Milliseconds: nil, latencyP95Milliseconds: nil, renderer: "")
    }
    let shared = Mutex(Shared())
    /// SDL's event type for "the protocol side has something" (0 until SDL is up).
    let wakeEventType = Atomic<UInt32>(0)
    let wakePending = Atomic<Bool>(false)
    let hudExtraLines = Mutex<[String]>([])

    struct Lifecycle {
        var opened: Result<Void, ViewerError>?
        var openWaiters: [CheckedContinuation<Void, any Error>] = []
        var ended = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
    }
    let lifecycle = Mutex(Lifecycle())

    public init(configuration: ViewerConfiguration) {
        self.configuration = configuration
        (input, inputSink) = AsyncStream.makeStream(of: ViewerInput.self, bufferingPolicy: .unbounded)
    }

    /// Seconds on the clock update arrival times and presents are measured with.
    public static func now() -> Double {
        let d = ContinuousClock.now - epoch
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
    private static let epoch = ContinuousClock.now

    /// The remote pointer shape (`ViewerCursor.dot` when the remote side sends none; a 0×0
    /// cursor hides the pointer over the window).
    public func setCursor(_ cursor: ViewerCursor) {
        shared.withLock { $0.cursor = cursor; $0.cursorChanged = true }
        wake()
    }

    /// The remote clipboard's text, to be put on the local clipboard.
    public func setRemoteClipboard(_ text: String) {
        shared.withLock { $0.clipboard = text }
        wake()
    }

    public func setStatus(_ status: ViewerStatus) {
        shared.withLock { $0.status = status }
        wake()
    }

    /// The remote monitors, in framebuffer coordinates (for the monitor picker).
    public func setScreens(_ screens: [ViewerRect]) {
        shared.withLock { $0.screens = screens }
        wake()
    }

    /// Lines the statistics overlay adds below its own (the encoding in use, the quality).
    public func setHUDExtra(_ lines: [String]) {
        hudExtraLines.withLock { $0 = lines }
    }

    /// Feedback for the pad the window reported as `id` (`ViewerGamepadEvent.arrived`): rumble,
    /// lights, adaptive triggers. What the pad cannot do it ignores.
    public func send(_ feedback: ViewerPadFeedback, toPad id: Int32) {
        shared.withLock { $0.padFeedback.append((id, feedback)) }
        wake()
    }

    /// Closes the window from the protocol side (the session is over).
    public func close() {
        shared.withLock { $0.closeRequested = true }
        wake()
    }

    /// A question the window asks in place of the picture (`ask`).
    struct Question: Sendable {
        var prompt: String
        var secret: Bool
        var answer: CheckedContinuation<String?, Never>
    }

    /// Asks the person for a line of text in the window (a password when `secret`: typed
    /// characters show as dots; a prompt may run to several lines): for when there is no terminal to prompt at. Returns nil when
    /// they cancel (Esc), the window closes, or it is not open.
    public func ask(_ prompt: String, secret: Bool) async -> String? {
        await withCheckedContinuation { (answer: CheckedContinuation<String?, Never>) in
            let refused: CheckedContinuation<String?, Never>? = lifecycle.withLock { l in
                guard case .success = l.opened, !l.ended else { return answer }
                return shared.withLock { s in
                    // One question at a time: a newer one replaces an unanswered one.
                    let previous = s.question?.answer
                    s.question = Question(prompt: prompt, secret: secret, answer: answer)
                    return previous
                }
            }
            refused?.resume(returning: nil)
            wake()
        }
    }

    /// What the window has presented so far.
    public var statistics: ViewerStatistics { shared.withLock { $0.statistics } }

    /// Opens the window on a thread of its own and returns once it is on screen, or throws
    /// why it cannot open (no display, no SDL).
    public func open() async throws {
        let thread = Thread { [self] in
            do {
                try self.run { self.opened(.success(())) }
            } catch let error as ViewerError {
                self.opened(.failure(error))
            } catch {
                self.opened(.failure(.sdl("\(error)")))
            }
            self.ended()
        }
        thread.name = "farcast viewer window"
        thread.start()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome: Result<Void, ViewerError>? = lifecycle.withLock { l in
                if l.opened == nil { l.openWaiters.append(continuation) }
                return l.opened
            }
            if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
        }
    }

    /// Returns once the window has closed.
    public func waitUntilClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lifecycle.withLock { l in
                if !l.ended { l.endWaiters.append(continuation) }
                return l.ended
            }
            if done { continuation.resume() }
        }
    }

    private func opened(_ outcome: Result<Void, ViewerError>) {
        let waiters = lifecycle.withLock { l -> [CheckedContinuation<Void, any Error>] in
            guard l.opened == nil else { return [] }
            l.opened = outcome
            defer { l.openWaiters = [] }
            return l.openWaiters
        }
        for w in waiters { w.resume(with: outcome.mapError { $0 as any Error }) }
    }

    private func ended() {
        let waiters = lifecycle.withLock { l -> [CheckedContinuation<Void, Never>] in
            l.ended = true
            defer { l.endWaiters = [] }
            return l.endWaiters
        }
        // A question the window never took goes unanswered.
        shared.withLock { s in defer { s.question = nil }; return s.question?.answer }?.resume(returning: nil)
        for w in waiters { w.resume() }
    }

    /// Tells the window thread that something was staged or set.
    public func wake() {
        let type = wakeEventType.load(ordering: .acquiring)
        guard type != 0, !wakePending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pushWakeEvent(type)
    }
}
