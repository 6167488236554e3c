import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A sound card made of a private PulseAudio and a thread, to measure when audio written
/// through ALSA actually leaves "the DAC".
///
/// There is no sound hardware here, and ALSA's own null/file plugins have no clock, so they
/// cannot tell whether a player accounts for its output latency. PulseAudio's pipe sink has no
/// clock either: it renders whenever its FIFO has room. The reader of the FIFO therefore *is* the
/// DAC. `FIFOOracle` reads it on its own schedule — block n at T0 + n·B/rate′, rate′ the nominal
/// rate made fast or slow by `ppm` like a real crystal — and declares that FIFO frame j leaves at
/// T0 + j/rate′ (CLOCK_MONOTONIC_RAW). Every rising edge of a loud pulse is reported with that
/// departure. PulseAudio accounts for what sits in the FIFO in the latency it reports, so a
/// client that follows the device's delay reports lines up with the oracle.
///
/// PulseAudio runs as this user (root in CI), with its only socket a unix one in the test's
/// folder, no D-Bus, no shared memory; a "keeper" stream of silence keeps the sink running so
/// a new stream starts at once. The ALSA client reaches it through alsa-plugins' `pulse` PCM,
/// named in private configuration text (`alsaConfiguration`) rather than the system's.
final class PulseAudioDAC: @unchecked Sendable {
    // @unchecked: the processes and oracle are set in init and only stopped afterwards.
    let folder: String
    let oracle: FIFOOracle
    private var pulse: BackgroundProcess?
    private var keeper: BackgroundProcess?

    /// ALSA configuration text defining PCM `device` as this PulseAudio.
    func alsaConfiguration(device: String) -> String { "pcm.\(device) { type pulse server \"unix:\(folder)/native\" }\n" }

    init(folder: String, rate: Int = 48000, ppm: Double = 0, seconds: Double) throws {
        self.folder = folder
        let pulseaudio = try requireExecutable("pulseaudio", package: "pulseaudio")
        let pacat = try requireExecutable("pacat", package: "pulseaudio-utils")
        guard FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/alsa-lib/libasound_module_pcm_pulse.so")
            || FileManager.default.fileExists(atPath: "/usr/lib/aarch64-linux-gnu/alsa-lib/libasound_module_pcm_pulse.so") else {
            throw MissingPeer(what: "ALSA's pulse plugin (Debian package libasound2-plugins)")
        }
        for sub in ["runtime", "state", "home"] {
            try FileManager.default.createDirectory(atPath: "\(folder)/\(sub)", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        // The FIFO and its size exist before PulseAudio opens it, so PulseAudio writes into this pipe.
        oracle = try FIFOOracle(path: "\(folder)/dac.fifo", rate: rate, ppm: ppm, seconds: seconds)
        let environment = ["PATH": "/usr/bin:/bin", "HOME": "\(folder)/home", "XDG_RUNTIME_DIR": "\(folder)/runtime",
                           "XDG_CONFIG_HOME": "\(folder)/home/.config", "PULSE_RUNTIME_PATH": "\(folder)/runtime",
                           "PULSE_STATE_PATH": "\(folder)/state", "DBUS_SESSION_BUS_ADDRESS": "disabled:"]
        // A shell stays the child, with PulseAudio under it, and `stop()` kills PulseAudio by the
        // pid the shell writes: PulseAudio (--daemonize=no) ignores the shell's end.
        let command = [pulseaudio, "-n", "--daemonize=no", "--system=no", "--use-pid-file=no", "--exit-idle-time=-1", "--disallow-exit",
                       "--disable-shm=yes", "--log-target=stderr", "--realtime=yes", "--high-priority=yes",
                       "-L", "'module-pipe-sink sink_name=out file=\(folder)/dac.fifo rate=\(rate) channels=2 format=s16le'",
                       "-L", "'module-native-protocol-unix auth-anonymous=1 socket=\(folder)/native'"].joined(separator: " ")
        pulse = try BackgroundProcess("/bin/sh", ["-c", "\(command) </dev/null & echo $! > '\(folder)/pulse.pid'; wait"],
                                      environment: environment, logName: "pulseaudio")
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: "\(folder)/native") {
            guard Date() < deadline, pulse?.isRunning == true else {
                throw PeerFailed(name: "PulseAudio did not come up", log: pulse?.log ?? "")
            }
            usleep(20_000)
        }
        var clientEnvironment = environment
        clientEnvironment["PULSE_SERVER"] = "unix:\(folder)/native"
        keeper = try BackgroundProcess("/bin/sh", ["-c", "exec \(pacat) --playback --raw --format=s16le --rate=\(rate) --channels=2 --latency-msec=10 --stream-name=keeper < /dev/zero"],
                                       environment: clientEnvironment, logName: "pacat-keeper")
        try oracle.start()
    }

    var pulseLog: String { pulse?.log ?? "" }

    func stop() {
        oracle.stop()
        keeper?.stop()
        if let text = try? String(contentsOfFile: "\(folder)/pulse.pid", encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            kill(pid, SIGKILL)
        }
        pulse?.stop()
    }

    deinit { stop() }
}

/// The DAC: reads the pipe sink's FIFO on a schedule of its own (see `PulseAudioDAC`).
final class FIFOOracle: @unchecked Sendable {
    // @unchecked: `fd` and the schedule are fixed before the thread starts; results behind a lock.
    struct Edge: Sendable {
        var frame: Int
        var departureUs: Double
    }
    struct Outcome: Sendable {
        var edges: [Edge] = []
        var frames = 0
        /// Reads that found the FIFO short at their scheduled time (the sound server fell behind).
        var lateReads = 0
        var maxReadLatenessUs = 0.0
        /// When the last frame read left (µs, CLOCK_MONOTONIC_RAW): edges after it were never seen.
        var endUs = 0.0
        var error: String?
        var done = false
    }

    let rate: Int
    let ppm: Double
    let seconds: Double
    private let fd: Int32
    private let outcome = Mutex(Outcome())
    private let running = Atomic<Bool>(false)
    private let blockFrames = 24

    init(path: String, rate: Int, ppm: Double, seconds: Double) throws {
        self.rate = rate
        self.ppm = ppm
        self.seconds = seconds
        guard mkfifo(path, 0o600) == 0 else { throw PeerFailed(name: "mkfifo \(path): \(String(cString: strerror(errno)))", log: "") }
        // Read-write: the open does not wait for a writer and EOF never comes.
        fd = open(path, O_RDWR)
        guard fd >= 0 else { throw PeerFailed(name: "open \(path): \(String(cString: strerror(errno)))", log: "") }
        // A small pipe: what it holds is DAC latency PulseAudio must report.
        _ = fcntl(fd, 1031, 4096)  // F_SETPIPE_SZ (Linux; Glibc does not export it to Swift)
    }

    var result: Outcome { outcome.withLock { $0 } }

    func start() throws {
        running.store(true, ordering: .releasing)
        let thread = Thread { [self] in self.run() }
        thread.name = "fifo-oracle"
        thread.start()
    }

    func stop() {
        running.store(false, ordering: .releasing)
        for _ in 0..<200 where !outcome.withLock({ $0.done }) { usleep(10_000) }
    }

    /// Waits for the oracle's scheduled run to end.
    func wait() -> Outcome {
        while !outcome.withLock({ $0.done }) { usleep(20_000) }
        return result
    }

    private static func rawNs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC_RAW, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    private func run() {
        defer {
            close(fd)
            outcome.withLock { $0.done = true }
        }
        // A real-time thread, as a DAC's interrupt would be; best effort.
        var param = sched_param(sched_priority: 50)
        _ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param)
        var byte: UInt8 = 0
        // The first bytes mean PulseAudio is connected and rendering; what it rendered before we
        // started the schedule is dropped.
        guard read(fd, &byte, 1) == 1 else { return outcome.withLock { $0.error = "no data from PulseAudio" } }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var junk = [UInt8](repeating: 0, count: 65536)
        while read(fd, &junk, junk.count) > 0 {}
        _ = fcntl(fd, F_SETFL, flags)

        let effectiveRate = Double(rate) * (1 + ppm * 1e-6)
        let frameBytes = 4
        var block = [Int16](repeating: 0, count: blockFrames * 2)
        let t0 = Self.rawNs() + 2_000_000
        let blocks = Int(seconds * effectiveRate) / blockFrames
        var loud = true  // a pulse already in progress at the start does not count
        var frame = 0
        var edges: [Edge] = []
        var lateReads = 0
        var maxLate = 0.0
        for n in 0..<blocks where running.load(ordering: .acquiring) {
            let due = t0 + Int64((Double(n * blockFrames) * 1e9 / effectiveRate).rounded())
            let wait = due - Self.rawNs()
            if wait > 0 {
                var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                var left = timespec()
                while nanosleep(&ts, &left) == -1 && errno == EINTR { ts = left }
            }
            var got = 0
            let need = blockFrames * frameBytes
            while got < need {
                let r = block.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, need - got) }
                if r <= 0 {
                    if r < 0 && errno == EINTR { continue }
                    outcome.withLock { $0.error = "FIFO read failed" }
                    return
                }
                got += r
            }
            let lateness = Double(Self.rawNs() - due) / 1000
            if lateness > 1000 { lateReads += 1 }
            maxLate = max(maxLate, lateness)
            for i in 0..<blockFrames {
                let isLoud = abs(Int(Int16(littleEndian: block[2 * i]))) >= 16384
                if isLoud && !loud {
                    let departure = Double(t0) / 1000 + Double(frame + i) * 1e6 / effectiveRate
                    edges.append(Edge(frame: frame + i, departureUs: departure))
                }
                loud = isLoud
            }
            frame += blockFrames
        }
        outcome.withLock {
            $0.edges = edges
            $0.frames = frame
            $0.lateReads = lateReads
            $0.maxReadLatenessUs = maxLate
            $0.endUs = Double(t0) / 1000 + Double(frame) * 1e6 / effectiveRate
        }
    }
}
