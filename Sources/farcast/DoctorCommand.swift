import ArgumentParser
import FarcastSupport
import Foundation
import Hosts
import Jellyfin
import Punktfunk
import Sendspin
import Viewer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `farcast doctor`: checks what each protocol needs on this machine and says how to fix what is
/// missing. Only a problem that breaks every command (the state directory) fails it; the rest
/// are warnings about the features they affect.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check what farcast needs on this machine, protocol by protocol, and how to fix what is missing.",
        discussion: """
            Checks the state directory (created 0700 if missing; files must get mode 0600), the clocks, ALSA playback devices (Sendspin's --output alsa:…), the mDNS responder (discovery and announcements), /dev/net/tun with the right to use it (farcast tun), which SSH client carries --ssh (your OpenSSH, else the built-in one and the keys and agent it can and cannot use), the QUIC libraries, the video decoder (libavcodec, VA-API) and client identity (farcast punktfunk), the remembered Jellyfin servers, and a display with SDL2 for windows (farcast vnc view). Exits 1 only when the state directory is unusable; the rest are warnings.

            Example: farcast doctor --json | jq '.checks[] | select(.status != "ok")'
            """
    )

    @OptionGroup var global: GlobalOptions

    struct Check: Codable {
        var name: String
        /// ok, warning or failed.
        var status: String
        var detail: String
        /// What to do about it, when not ok.
        var fix: String?
    }

    func run() async throws {
        try await reportingFailures {
            var checks: [Check] = []
            let state = try StateDirectory.resolve()
            var statePrivate = false
            do {
                try state.ensureExists()
                let probe = "doctor-probe"
                try state.write(Array("ok".utf8), to: probe)
                let mode = try state.permissions(of: probe) ?? 0
                try state.remove(probe)
                statePrivate = mode == 0o600
                checks.append(Check(name: "state directory", status: statePrivate ? "ok" : "failed",
                                    detail: "\(state.path), files mode \(String(mode, radix: 8))",
                                    fix: statePrivate ? nil : "the file system does not keep file modes; set XDG_STATE_HOME to a folder on one that does"))
            } catch {
                checks.append(Check(name: "state directory", status: "failed", detail: "\(state.path): \(describe(error))",
                                    fix: "make \(state.path) a folder you own, or set XDG_STATE_HOME elsewhere"))
            }
            let monotonic = SystemClock(.monotonic).now(), raw = SystemClock(.monotonicRaw).now()
            checks.append(Check(name: "clocks", status: raw.nanoseconds > 0 ? "ok" : "warning",
                                detail: String(format: "CLOCK_MONOTONIC %.3f s, CLOCK_MONOTONIC_RAW %.3f s", Double(monotonic.nanoseconds) / 1e9, Double(raw.nanoseconds) / 1e9),
                                fix: raw.nanoseconds > 0 ? nil : "CLOCK_MONOTONIC_RAW is missing: Sendspin's sync falls back to a slewed clock"))
            checks.append(soundCheck())
            checks.append(await mdnsCheck())
            checks.append(tunCheck())
            checks.append(sshCheck())
            checks.append(punktfunkCheck(state))
            checks.append(jellyfinCheck(state))
            checks.append(displayCheck())

            if global.json {
                try printJSON(DoctorReport(version: FarcastInfo.version, stateDirectory: state.path, stateFilesPrivate: statePrivate, checks: checks))
            } else {
                print("farcast \(FarcastInfo.version)")
                for check in checks {
                    let mark = check.status == "ok" ? "ok  " : check.status == "warning" ? "warn" : "FAIL"
                    print("\(mark)  \(check.name.padding(toLength: 16, withPad: " ", startingAt: 0)) \(check.detail)")
                    if let fix = check.fix { print("      \(String(repeating: " ", count: 16)) → \(fix)") }
                }
            }
            if let failed = checks.first(where: { $0.status == "failed" }) {
                throw CommandFailure(message: "\(failed.name): \(failed.detail)")
            }
        }
    }

    private func soundCheck() -> Check {
        #if canImport(CALSA)
        // What `--output alsa:default` would do, and the devices that are not mere plugins.
        let devices = ALSADevices.playback().filter { $0.name.contains(":") || ["default", "pulse", "pipewire"].contains($0.name) }
        let names = devices.prefix(5).map(\.name).joined(separator: ", ") + (devices.count > 5 ? ", …" : "")
        do {
            try ALSASink(device: "default").check()
            return Check(name: "sound (ALSA)", status: "ok", detail: "alsa:default opens; devices: \(names.isEmpty ? "default only" : names)", fix: nil)
        } catch {
            return Check(name: "sound (ALSA)", status: "warning", detail: "alsa:default does not open (\(describe(error)))" + (names.isEmpty ? "" : "; devices: \(names)"),
                         fix: "`sendspin … --output alsa:…` needs a sound card or a sound server (PipeWire, or PulseAudio with libasound2-plugins); meanwhile use --output null or wav:PATH")
        }
        #else
        return Check(name: "sound (ALSA)", status: "warning", detail: "ALSA output exists on Linux only", fix: nil)
        #endif
    }

    private func mdnsCheck() async -> Check {
        do {
            _ = try await DNSServiceDiscovery().browse(type: "_farcast-doctor._tcp", timeout: .milliseconds(300))
            return Check(name: "mDNS", status: "ok", detail: "the mDNS responder answers (discovery and announcements work)", fix: nil)
        } catch {
            return Check(name: "mDNS", status: "warning", detail: describe(error),
                         fix: "install and start avahi-daemon (apt install avahi-daemon; systemctl start avahi-daemon) for --discover and announcements; URLs work without it")
        }
    }

    private func tunCheck() -> Check {
        let fd = open("/dev/net/tun", O_RDWR)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno)).lowercased()
            return Check(name: "TUN", status: "warning", detail: "/dev/net/tun: \(reason)",
                         fix: errno == ENOENT ? "load the tun module (modprobe tun) for `farcast tun`" : "`farcast tun` needs root or CAP_NET_ADMIN (sudo setcap cap_net_admin+ep \(CommandLine.arguments[0]))")
        }
        close(fd)
        let admin = geteuid() == 0 || hasCapability(12)  // CAP_NET_ADMIN
        return Check(name: "TUN", status: admin ? "ok" : "warning", detail: "/dev/net/tun opens" + (admin ? ", CAP_NET_ADMIN held" : ", but CAP_NET_ADMIN is missing"),
                     fix: admin ? nil : "`farcast tun` needs root or CAP_NET_ADMIN (sudo setcap cap_net_admin+ep \(CommandLine.arguments[0]))")
    }

    /// Which SSH client `--ssh` uses: the user's OpenSSH when there is one (it can use whatever
    /// ssh can), else the built-in client with the keys it finds in ~/.ssh and can sign with.
    private func sshCheck() -> Check {
        if let command = try? OpenSSHCommand.find() {
            return Check(name: "SSH (--ssh)", status: "ok",
                         detail: "OpenSSH \(command.program) carries --ssh: your agent, keys, one-time codes and ~/.ssh/config work as with ssh (--ssh-via builtin for farcast's own client)",
                         fix: nil)
        }
        let folder = SSHPaths.home + "/.ssh/"
        let exists = { FileManager.default.fileExists(atPath: folder + $0) }
        let usable = ["id_ecdsa", "id_ed25519"].filter(exists)
        let unusable = ["id_rsa", "id_dsa"].filter(exists)
        let agent = ProcessInfo.processInfo.environment["SSH_AUTH_SOCK"].map { !$0.isEmpty } ?? false
        var found: [String] = usable.map { "~/.ssh/\($0)" }
        if usable.isEmpty { found.append("no Ed25519 or ECDSA key in ~/.ssh") }
        if !unusable.isEmpty { found.append("~/.ssh/" + unusable.joined(separator: ", ~/.ssh/") + " (not usable by the built-in SSH)") }
        if agent { found.append("ssh-agent (not usable by the built-in SSH)") }
        let builtin = "no ssh program on PATH, so the built-in client carries --ssh: "
        guard usable.isEmpty, !unusable.isEmpty || agent else {
            return Check(name: "SSH (--ssh)", status: "ok", detail: builtin + found.joined(separator: "; ") + "; passwords work too", fix: nil)
        }
        return Check(name: "SSH (--ssh)", status: "warning", detail: builtin + found.joined(separator: "; "),
                     fix: "install OpenSSH's client (apt install openssh-client), which uses the agent and RSA keys; or make a key the built-in SSH can sign with (ssh-keygen -t ed25519) and add it to the server, or log in with --ssh-password-file")
    }

    /// The QUIC libraries punktfunk loads on first use, and this device's identity.
    private func punktfunkCheck(_ state: StateDirectory) -> Check {
        let identity = FileManager.default.fileExists(atPath: state.path + "/punktfunk/client-cert.pem")
            ? "client identity in \(state.path)/punktfunk" : "client identity made on first connect"
        do {
            try QUICLibraries.load()
        } catch {
            return Check(name: "punktfunk", status: "warning", detail: describe(error), fix: "`farcast punktfunk` needs ngtcp2 and GnuTLS (apt install libngtcp2-9 libngtcp2-crypto-gnutls2 libgnutls30)")
        }
        #if canImport(CFFmpeg)
        do {
            let (codecs, vaapiProblem) = try FFmpegVideoDecoder.capabilities()
            let decode = "libavcodec decodes \(codecs.map(\.rawValue).joined(separator: ", ")) " + (vaapiProblem.map { "in software (VA-API: \($0))" } ?? "with VA-API")
            return Check(name: "punktfunk", status: "ok", detail: "ngtcp2 and GnuTLS load; \(decode); \(identity)", fix: nil)
        } catch {
            return Check(name: "punktfunk", status: "warning", detail: describe(error), fix: "`farcast punktfunk connect` decodes video with FFmpeg's libavcodec (apt install libavcodec59)")
        }
        #else
        return Check(name: "punktfunk", status: "ok", detail: "ngtcp2 and GnuTLS load; \(identity)", fix: nil)
        #endif
    }

    /// The Jellyfin servers and users remembered by `farcast jellyfin login`.
    private func jellyfinCheck(_ state: StateDirectory) -> Check {
        do {
            let remembered = try FileCredentialStore(directory: state).load()
            guard let current = remembered.server(matching: nil) else {
                return Check(name: "Jellyfin", status: "ok", detail: "no server signed in to (farcast jellyfin login URL)", fix: nil)
            }
            let users = remembered.servers.reduce(0) { $0 + $1.users.count }
            return Check(name: "Jellyfin", status: "ok",
                         detail: "\(remembered.servers.count) server(s), \(users) user(s) remembered; current: \(current.name) at \(current.url)", fix: nil)
        } catch {
            return Check(name: "Jellyfin", status: "warning", detail: "the remembered servers cannot be read: \(describe(error))",
                         fix: "remove \(state.path)/jellyfin/servers.json and sign in again with farcast jellyfin login")
        }
    }

    /// A display for windows (`vnc view`) and SDL2 to draw on it.
    private func displayCheck() -> Check {
        let environment = ProcessInfo.processInfo.environment
        let displays = [("WAYLAND_DISPLAY", "Wayland"), ("DISPLAY", "X11")].compactMap { key, name in
            environment[key].flatMap { $0.isEmpty ? nil : "\(name) (\(key)=\($0))" }
        }
        var library = "SDL2 loads"
        do { try ViewerWindow.loadLibraries() } catch {
            return Check(name: "display", status: "warning", detail: describe(error), fix: "windows (farcast vnc view) need SDL2: apt install libsdl2-2.0-0 libsdl2-ttf-2.0-0")
        }
        guard !displays.isEmpty else {
            library += "; no display: neither DISPLAY nor WAYLAND_DISPLAY is set"
            return Check(name: "display", status: "warning", detail: library,
                         fix: "run farcast vnc view in a desktop session (or with DISPLAY set to an X server); the other commands need no display")
        }
        return Check(name: "display", status: "ok", detail: "\(library); \(displays.joined(separator: ", "))", fix: nil)
    }

    /// Whether this process has capability `bit` in its effective set (Linux).
    private func hasCapability(_ bit: Int) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16) else { return false }
        return mask & (1 << UInt64(bit)) != 0
    }
}

struct DoctorReport: Codable {
    var version: String
    var stateDirectory: String
    var stateFilesPrivate: Bool
    var checks: [DoctorCommand.Check]
}
