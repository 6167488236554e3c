import FarcastSupport
import Foundation
import Sendspin
import Synchronization

/// `farcast sendspin play|listen --tui`: the now-playing display (`NowPlaying`) on the terminal,
/// redrawn four times a second on the alternate screen, and the keys read raw from it turned
/// into controller commands (or quitting). The terminal is restored when it stops.
final class NowPlayingTerminal: @unchecked Sendable {
    // @unchecked: `saved` is written once in init; the rest is behind locks or atomics.
    private let model = Mutex(NowPlaying())
    private var saved = termios()
    private let clock = SystemClock(.monotonicRaw)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private var threads = 0

    /// Takes the terminal (raw keys, no echo, the alternate screen); fails when stdin or stdout is not one.
    init() throws {
        guard isatty(STDIN_FILENO) != 0, isatty(STDOUT_FILENO) != 0 else {
            throw CommandFailure(message: "--tui needs a terminal on stdin and stdout (without it, telemetry lines go to stderr)", exitCode: 2)
        }
        tcgetattr(STDIN_FILENO, &saved)
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        // Reads return after a tenth of a second with nothing, so the reader notices a stop.
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 0
            cc[Int(VTIME)] = 1
        }
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        write("\u{1b}[?1049h\u{1b}[?25l")
    }

    func update(_ body: (inout NowPlaying) -> Void) { model.withLock { body(&$0) } }

    /// Draws and reads keys until `stop()`: keys go to `player` as commands; q stops it.
    func start(player: SendspinPlayer) {
        threads = 2
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                draw()
                usleep(250_000)
            }
            finished.signal()
        }
        Thread.detachNewThread { [self] in
            var byte: UInt8 = 0
            while !stopped.load(ordering: .relaxed) {
                guard read(STDIN_FILENO, &byte, 1) == 1 else { continue }
                let action = model.withLock { $0.action(forKey: Character(Unicode.Scalar(byte))) }
                switch action {
                case .send(let command)?: player.send(command)
                case .quit?: player.stop(reason: "user_request")
                case nil: break
                }
                draw()
            }
            finished.signal()
        }
    }

    /// Stops drawing and reading and gives the terminal back as it was.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        for _ in 0..<threads { finished.wait() }
        write("\u{1b}[?25h\u{1b}[?1049l")
        tcsetattr(STDIN_FILENO, TCSANOW, &saved)
    }

    private func draw() {
        var size = winsize()
        let width = ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
        let lines = model.withLock { $0.lines(width: width, atClientUs: clock.now().microseconds) }
        write("\u{1b}[H\u{1b}[2J" + lines.joined(separator: "\r\n"))
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { _ = Foundation.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    }
}
