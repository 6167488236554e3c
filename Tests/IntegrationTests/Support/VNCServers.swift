import CZlib
import Foundation
import RFB

/// The Python that runs helper scripts: the setup venv's, else the system's python3.
func pythonInterpreter() throws -> String {
    let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
    if FileManager.default.isExecutableFile(atPath: venv + "/bin/python") { return venv + "/bin/python" }
    return try requireExecutable("python3", package: "python3")
}

/// A VNC password in both forms servers read: TigerVNC's obfuscated file and plain text for
/// farcast's --password-file.
struct PasswordFiles {
    let plain: String
    let tigervnc: String
    let password: String

    init(in folder: TemporaryFolder, password: String = "secret12") throws {
        self.password = password
        plain = folder.path + "/password.txt"
        tigervnc = folder.path + "/passwd"
        try (password + "\n").write(toFile: plain, atomically: true, encoding: .utf8)
        // vncpasswd -f writes the 8-byte obfuscated password, binary, to stdout.
        let vncpasswd = try requireExecutable("vncpasswd", package: "tigervnc-tools")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: vncpasswd)
        process.arguments = ["-f"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data((password + "\n").utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, data.count == 8 else {
            throw PeerFailed(name: "vncpasswd", log: "exit \(process.terminationStatus), \(data.count) bytes")
        }
        try data.write(to: URL(fileURLWithPath: tigervnc))
        chmod(tigervnc, 0o600)
        chmod(plain, 0o600)
    }
}

/// Something an X client can draw on: a display number with its environment.
protocol XDisplay {
    var display: Int { get }
    var port: Int { get }
}

extension XDisplay {
    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["DISPLAY"] = ":\(display)"
        return env
    }

    var endpoint: VNCEndpoint { VNCEndpoint(host: "127.0.0.1", port: port) }

    /// Runs an X client against this display and waits for it.
    @discardableResult
    func x(_ tool: String, _ arguments: [String], package: String = "x11-xserver-utils") throws -> ProcessResult {
        let result = try run(try requireExecutable(tool, package: package), arguments, environment: environment, timeout: 30)
        guard result.status == 0 else { throw PeerFailed(name: tool, log: result.stderr) }
        return result
    }

    /// Paints known content: a solid background and a picture window at the top-left.
    /// Returns the picture viewer, which must stay alive while the content is needed.
    func drawTestContent(kind: String = "mixed", width: Int = 240, height: Int = 150, seed: Int = 1,
                         background: String = "steelblue", in folder: TemporaryFolder) throws -> BackgroundProcess {
        try x("xsetroot", ["-solid", background])
        let picture = folder.path + "/picture-\(seed)-\(kind).xwd"
        let made = try run(try pythonInterpreter(), [packageRoot.appendingPathComponent("scripts/lib/make_xwd.py").path,
                                                     picture, "\(width)", "\(height)", "\(seed)", kind])
        guard made.status == 0 else { throw PeerFailed(name: "make_xwd.py", log: made.stderr) }
        let viewer = try BackgroundProcess(try requireExecutable("xwud", package: "x11-apps"), ["-in", picture],
                                           environment: environment, logName: "xwud")
        // Wait until the picture is on screen: its first pixel differs from the background.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let shot = try? XWDImage.captureRoot(of: self), shot.pixels[0] != shot.pixels[shot.width * shot.height - 1] {
                usleep(200_000)   // let the server's damage tracking settle
                return viewer
            }
            usleep(50_000)
        }
        throw PeerFailed(name: "xwud", log: "the test picture never appeared on :\(display)\n" + viewer.log)
    }
}

/// TigerVNC's Xvnc on 127.0.0.1.
final class XvncServer: XDisplay, @unchecked Sendable {
    // @unchecked: immutable after init except the process, which only stop()/deinit touch.
    let display: Int
    let port: Int
    let process: BackgroundProcess

    /// `securityTypes` nil leaves Xvnc's own default (TLSVnc,VncAuth). With `pamUser`, Xvnc runs
    /// in a private mount namespace where that user exists, for the Plain security types.
    /// `reuseDisplay`: a display number used before (a server restarted in place); new by default.
    init(geometry: String = "400x300", securityTypes: String? = "VncAuth", passwords: PasswordFiles?, pamUser: PAMUser? = nil,
         extra: [String] = [], reuseDisplay: Int? = nil) throws {
        display = reuseDisplay ?? DisplayNumbers.allocate()
        port = 5900 + display
        var arguments = [":\(display)", "-rfbport", "\(port)", "-localhost", "-interface", "127.0.0.1",
                         "-geometry", geometry, "-depth", "24", "-nolisten", "tcp", "-AlwaysShared"]
        if let securityTypes { arguments += ["-SecurityTypes", securityTypes] }
        if let passwords { arguments += ["-PasswordFile", passwords.tigervnc] }
        let xvnc = try requireExecutable("Xvnc", package: "tigervnc-standalone-server")
        if let pamUser {
            arguments += ["-PlainUsers", pamUser.name, "-PAMService", "tigervnc"]
            process = try pamUser.launch(xvnc, arguments + extra, logName: "Xvnc")
        } else {
            process = try BackgroundProcess(xvnc, arguments + extra, logName: "Xvnc")
        }
        try waitForTCPPort(port, process: process)
    }

    func stop() {
        process.stop()
        removeStaleXFiles(display)
    }

    deinit { stop() }
}

/// QEMU's own VNC server (Debian's qemu-system-x86 7.2) on 127.0.0.1, for a PC with no disk.
/// `running: false` creates the machine without starting it (-S: no CPU time; the screen says the
/// guest has not initialised the display); running, SeaBIOS finds nothing to boot and says so in
/// VGA text mode. The trace of key events shows what a client sent (keysym and, with QEMU
/// extended key events, the XT scancode); the monitor takes `screendump`, QEMU's own picture of
/// its screen.
final class QEMUVNCServer: XDisplay, @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by deinit.
    let display: Int
    let port: Int
    let process: BackgroundProcess
    let tracePath: String
    let monitorPath: String
    private let folder: TemporaryFolder

    /// `vncOptions` are appended to `-vnc 127.0.0.1:N` (",password-secret=pw,tls-creds=tls0");
    /// `objects` are `-object` values (the secrets and TLS credentials those options name).
    /// `machine` is the -machine value, `extra` more arguments (an -audiodev, a -drive).
    init(folder: TemporaryFolder, running: Bool = false, vncOptions: String = "", objects: [String] = [],
         machine: String = "pc", extra: [String] = []) throws {
        self.folder = folder
        display = DisplayNumbers.allocate()
        port = 5900 + display
        tracePath = folder.path + "/qemu-\(display)-trace.log"
        monitorPath = folder.path + "/qemu-\(display)-monitor.sock"
        let qemu = try requireExecutable("qemu-system-x86_64", package: "qemu-system-x86")
        var arguments = ["-machine", machine, "-accel", "tcg", "-m", "32", "-nodefaults", "-vga", "std", "-display", "none",
                         "-vnc", "127.0.0.1:\(display)\(vncOptions)", "-monitor", "unix:\(monitorPath),server=on,wait=off",
                         "-trace", "vnc_key_event_ext", "-trace", "vnc_key_event_map", "-D", tracePath]
        if !running { arguments.append("-S") }
        for object in objects { arguments += ["-object", object] }
        process = try BackgroundProcess(qemu, arguments + extra, logName: "qemu")
        try waitForTCPPort(port, process: process)
    }

    /// Key events as QEMU saw them: (down, keysym, XT scancode; nil when it came without one).
    var keyEvents: [(down: Bool, keysym: UInt32, scancode: UInt32?)] {
        let log = (try? String(contentsOfFile: tracePath, encoding: .utf8)) ?? ""
        // vnc_key_event_ext down 1, sym 0x61, keycode 0x1e [a]   (vnc_key_event_map: from the keysym)
        return log.split(separator: "\n").compactMap { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "," })
            guard words.count >= 7, words[0].hasPrefix("vnc_key_event_"), words[1] == "down", words[3] == "sym", words[5] == "keycode",
                  let sym = UInt32(words[4].dropFirst(2), radix: 16), let code = UInt32(words[6].dropFirst(2), radix: 16) else { return nil }
            return (words[2] == "1", sym, words[0] == "vnc_key_event_ext" ? code : nil)
        }
    }

    /// QEMU's own picture of its screen (the monitor's `screendump`): width, height and
    /// 0x00RRGGBB pixels.
    func screendump() throws -> (width: Int, height: Int, pixels: [UInt32]) {
        let path = folder.path + "/screendump-\(UInt32.random(in: 0...UInt32.max)).ppm"
        let sent = try run(try requireExecutable("socat", package: "socat"), ["-t", "2", "-", "UNIX-CONNECT:\(monitorPath)"],
                           stdin: Data("screendump \(path)\n".utf8), timeout: 20)
        guard sent.status == 0 else { throw PeerFailed(name: "socat to QEMU's monitor", log: sent.stderr) }
        var bytes: [UInt8] = []
        try waitUntil("QEMU to write its screendump", timeout: 10) {
            bytes = Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())
            return Self.ppm(bytes) != nil
        }
        try? FileManager.default.removeItem(atPath: path)
        guard let image = Self.ppm(bytes) else { throw PeerFailed(name: "QEMU screendump", log: "not a complete PPM") }
        return image
    }

    /// A binary PPM (P6, maxval 255) as 0x00RRGGBB pixels; nil while incomplete.
    static func ppm(_ bytes: [UInt8]) -> (width: Int, height: Int, pixels: [UInt32])? {
        var fields: [Int] = [], i = 2
        guard bytes.count > 2, bytes[0] == 0x50, bytes[1] == 0x36 else { return nil }
        while fields.count < 3, i < bytes.count {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
            var n = 0, digits = 0
            while i < bytes.count, (0x30...0x39).contains(bytes[i]) { n = n * 10 + Int(bytes[i] - 0x30); i += 1; digits += 1 }
            guard digits > 0 else { return nil }
            fields.append(n)
        }
        i += 1
        guard fields.count == 3, fields[2] == 255, bytes.count >= i + fields[0] * fields[1] * 3 else { return nil }
        let pixels = (0..<(fields[0] * fields[1])).map { p in
            let o = i + p * 3
            return UInt32(bytes[o]) << 16 | UInt32(bytes[o + 1]) << 8 | UInt32(bytes[o + 2])
        }
        return (fields[0], fields[1], pixels)
    }

    deinit { process.stop() }
}

/// A certificate authority with a server and a client certificate it signed, laid out as QEMU's
/// tls-creds-x509 reads a directory (ca-cert.pem, server-cert.pem, server-key.pem).
struct TestPKI {
    let directory: String
    var clientCert: String { directory + "/client-cert.pem" }
    var clientKey: String { directory + "/client-key.pem" }

    init(in folder: TemporaryFolder) throws {
        directory = folder.path + "/pki"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let openssl = try requireExecutable("openssl", package: "openssl")
        func step(_ arguments: [String]) throws {
            let result = try run(openssl, arguments)
            guard result.status == 0 else { throw PeerFailed(name: "openssl \(arguments[0])", log: result.stderr) }
        }
        let d = directory
        try step(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/ca-key.pem", "-out", d + "/ca-cert.pem",
                  "-days", "2", "-subj", "/CN=farcast test CA"])
        for (name, subject) in [("server", "/CN=localhost"), ("client", "/CN=farcast-client")] {
            try step(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/\(name)-key.pem", "-out", d + "/\(name).csr", "-subj", subject])
            try step(["x509", "-req", "-in", d + "/\(name).csr", "-CA", d + "/ca-cert.pem", "-CAkey", d + "/ca-key.pem", "-CAcreateserial",
                      "-out", d + "/\(name)-cert.pem", "-days", "2"])
        }
    }
}

/// TightVNC 1.3.10's Xtightvnc on 127.0.0.1 (Debian's tightvncserver): an X server with its own
/// RFB 3.8 server, offering VncAuth and the Tight security type.
final class TightVNCServer: XDisplay, @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by deinit.
    let display: Int
    let port: Int
    let process: BackgroundProcess

    /// Without `passwords` the server asks for none (it then offers None and Tight).
    init(geometry: String = "400x300", passwords: PasswordFiles?) throws {
        display = DisplayNumbers.allocate()
        port = 5900 + display
        let server = try requireExecutable("Xtightvnc", package: "tightvncserver")
        process = try BackgroundProcess(server, [":\(display)", "-rfbport", "\(port)", "-localhost", "-nolisten", "tcp",
                                                 "-geometry", geometry, "-depth", "24"] + (passwords.map { ["-rfbauth", $0.tigervnc] } ?? []),
                                        logName: "Xtightvnc")
        try waitForTCPPort(port, process: process)
        try waitForRFBBanner(port, timeout: 20, process: process)
    }

    deinit {
        process.stop()
        removeStaleXFiles(display)
    }
}

/// A self-signed certificate and key made with openssl, for servers' TLS.
struct TestCertificate {
    let cert: String
    let key: String

    init(name: String, in folder: TemporaryFolder, subject: String = "/CN=localhost") throws {
        cert = folder.path + "/\(name).pem"
        key = folder.path + "/\(name)-key.pem"
        let result = try run(try requireExecutable("openssl", package: "openssl"),
                             ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", subject])
        guard result.status == 0 else { throw PeerFailed(name: "openssl req", log: result.stderr) }
    }

    var fingerprint: String { get throws { try Self.fingerprint(ofPEM: cert) } }

    /// The SHA-256 of the certificate's DER, lowercase hex, as farcast pins it.
    static func fingerprint(ofPEM pem: String) throws -> String {
        let result = try run(try requireExecutable("openssl", package: "openssl"), ["x509", "-in", pem, "-noout", "-fingerprint", "-sha256"])
        return String(result.stdout.split(separator: "=").last ?? "").replacingOccurrences(of: ":", with: "")
            .trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }
}

/// A user that exists only for one server process: the server runs in a private mount namespace
/// whose /etc/passwd and /etc/shadow are copies with the user added, so PAM (pam_unix) accepts
/// its password and nothing on the machine's real accounts changes.
struct PAMUser {
    let name: String
    let password: String
    private let passwd: String
    private let shadow: String

    /// `shell`: x11vnc checks a -unixpw login by running `su` as the user, which needs a shell
    /// that runs commands.
    init(name: String = "fcplain", password: String = "pläin pass", shell: String = "/usr/sbin/nologin", in folder: TemporaryFolder) throws {
        self.name = name
        self.password = password
        passwd = folder.path + "/passwd"
        shadow = folder.path + "/shadow"
        let hashed = try run(try requireExecutable("openssl", package: "openssl"), ["passwd", "-6", "-stdin"], stdin: Data((password + "\n").utf8))
        guard hashed.status == 0 else { throw PeerFailed(name: "openssl passwd", log: hashed.stderr) }
        let hash = hashed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try (try String(contentsOfFile: "/etc/passwd", encoding: .utf8) + "\(name):x:64123:64123:farcast test:/nonexistent:\(shell)\n")
            .write(toFile: passwd, atomically: true, encoding: .utf8)
        try (try String(contentsOfFile: "/etc/shadow", encoding: .utf8) + "\(name):\(hash):19000:0:99999:7:::\n")
            .write(toFile: shadow, atomically: true, encoding: .utf8)
        chmod(shadow, 0o640)
    }

    /// A file with the password, as farcast's --password-file reads it.
    func passwordFile(in folder: TemporaryFolder) throws -> String {
        let path = folder.path + "/\(name)-password.txt"
        try (password + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    func launch(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, logName: String) throws -> BackgroundProcess {
        // unshare execs the shell, which execs the server: the process stopped is the server.
        let script = "mount --bind \"$1\" /etc/passwd && mount --bind \"$2\" /etc/shadow && shift 2 && exec \"$@\""
        return try BackgroundProcess(try requireExecutable("unshare", package: "util-linux"),
                                     ["-m", "sh", "-c", script, "sh", passwd, shadow, executable] + arguments,
                                     environment: environment, logName: logName)
    }
}

/// Starts Xvfb on `display` and returns once an X client can open it. The socket file alone
/// is not enough: it appears before the server has finished starting, and a client that comes
/// in then can be refused (a viewer in CI once fell back to SDL's offscreen driver that way).
/// Fails with Xvfb's own log if it exits or does not answer within `timeout`.
func startXvfb(display: Int, geometry: String, timeout: TimeInterval = 15) throws -> BackgroundProcess {
    let xvfb = try BackgroundProcess(try requireExecutable("Xvfb", package: "xvfb"),
                                     [":\(display)", "-screen", "0", "\(geometry)x24", "-nolisten", "tcp"], logName: "Xvfb")
    let probe = try requireExecutable("xdpyinfo", package: "x11-utils")
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        guard xvfb.isRunning else { throw PeerFailed(name: "Xvfb :\(display)", log: xvfb.log) }
        if FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display)"),
           (try? run(probe, ["-display", ":\(display)"], timeout: 10))?.status == 0 { return xvfb }
        guard Date() < deadline else {
            xvfb.stop()
            throw PeerFailed(name: "Xvfb :\(display)", log: "no X client could open it within \(Int(timeout)) s\n" + xvfb.log)
        }
        usleep(50_000)
    }
}

/// An X server killed before it could clean up leaves its lock file and socket behind; remove
/// them once it is gone so display numbers do not pile up in /tmp.
func removeStaleXFiles(_ display: Int) {
    let lock = "/tmp/.X\(display)-lock"
    if let text = try? String(contentsOfFile: lock, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
       kill(pid, 0) == 0 {
        return      // still running (someone else's)
    }
    try? FileManager.default.removeItem(atPath: lock)
    try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(display)")
}

/// x11vnc serving an Xvfb display on 127.0.0.1.
final class X11vncServer: XDisplay, @unchecked Sendable {
    let display: Int
    let port: Int
    let xvfb: BackgroundProcess
    let server: BackgroundProcess

    /// `tlsFromTheFirstByte`: the server speaks TLS before the banner (`-sslonly`), so readiness
    /// is the port alone.
    ///
    /// `pamUser`: a user x11vnc's -unixpw can check (it runs in a mount namespace that sees the
    /// user's passwd and shadow entries).
    ///
    /// `anonymousTLS`: x11vnc 0.9.16's anonymous suites (ANONTLS and the VeNCrypt TLS* subtypes)
    /// are ADH ciphers, which OpenSSL 3 refuses at its default security level; x11vnc does not
    /// lower it (later versions do), so every client's handshake fails with "no shared cipher".
    /// The server then gets an OpenSSL configuration of its own at level 0, as a user running
    /// this x11vnc for anonymous TLS would have to give it.
    init(geometry: String = "400x300", password: String?, folder: TemporaryFolder, extra: [String] = [],
         startupTimeout: TimeInterval = 30, tlsFromTheFirstByte: Bool = false, anonymousTLS: Bool = false,
         pamUser: PAMUser? = nil) throws {
        display = DisplayNumbers.allocate()
        port = 5900 + DisplayNumbers.allocate()
        xvfb = try startXvfb(display: display, geometry: geometry)
        let x11vnc = try requireExecutable("x11vnc", package: "x11vnc")
        var arguments = ["-display", ":\(display)", "-rfbport", "\(port)", "-localhost", "-forever", "-shared", "-noxdamage", "-nopw"]
        if let password {
            let file = folder.path + "/x11vnc-passwd-\(display)"
            let stored = try run(x11vnc, ["-storepasswd", password, file])
            guard stored.status == 0 else { throw PeerFailed(name: "x11vnc -storepasswd", log: stored.stderr) }
            arguments = arguments.filter { $0 != "-nopw" } + ["-rfbauth", file]
        }
        var environment: [String: String]? = nil
        if anonymousTLS {
            let configuration = folder.path + "/x11vnc-openssl-\(display).cnf"
            try """
            openssl_conf = init
            [init]
            ssl_conf = ssl
            [ssl]
            system_default = defaults
            [defaults]
            CipherString = ALL:@SECLEVEL=0
            """.write(toFile: configuration, atomically: true, encoding: .utf8)
            environment = ProcessInfo.processInfo.environment.merging(["OPENSSL_CONF": configuration]) { $1 }
        }
        if let pamUser {
            server = try pamUser.launch(x11vnc, arguments + extra, environment: environment, logName: "x11vnc")
        } else {
            server = try BackgroundProcess(x11vnc, arguments + extra, environment: environment, logName: "x11vnc")
        }
        try waitForTCPPort(port, timeout: startupTimeout, process: server)
        // x11vnc listens before its main loop runs: wait until it greets, and if it never does,
        // fail here with its log rather than later with a client-side timeout.
        if !tlsFromTheFirstByte { try waitForRFBBanner(port, timeout: startupTimeout, process: server) }
    }

    deinit {
        server.stop()
        xvfb.stop()
        removeStaleXFiles(display)
    }
}

/// GNOME's vino 3.22 on its own Xvfb: the server the older TLS security type (18) comes from.
/// With `require-encryption` it offers only that type, and VNC Authentication inside it. Its
/// settings come from a GSettings key file (no dconf), its D-Bus needs from a private session
/// bus (`dbus-run-session`); it listens on 127.0.0.1 (and ::1) only (`network-interface lo`).
/// It gets a runtime directory and home of its own: with a shared XDG_RUNTIME_DIR it found the
/// keyring daemon another test left there and waited on it before answering a login. It runs
/// in its own process group, which is ended whole (the session bus and the accessibility bus
/// GTK starts would outlive dbus-run-session).
final class VinoServer: XDisplay, @unchecked Sendable {
    // @unchecked: every stored property is immutable after init; the processes are only
    // stopped by deinit (as for X11vncServer).
    let display: Int
    let port: Int
    let xvfb: BackgroundProcess
    let server: BackgroundProcess

    init(password: String, folder: TemporaryFolder, geometry: String = "400x300") throws {
        display = DisplayNumbers.allocate()
        port = 5900 + DisplayNumbers.allocate()
        let vino = "/usr/libexec/vino-server"
        guard FileManager.default.isExecutableFile(atPath: vino) else {
            throw PeerFailed(name: "vino-server", log: "\(vino) is missing: install it with `apt-get install --no-install-recommends vino` (scripts/setup does)")
        }
        let dbus = try requireExecutable("dbus-run-session", package: "dbus-daemon")
        xvfb = try startXvfb(display: display, geometry: geometry)
        let config = folder.path + "/vino-\(display)"
        try FileManager.default.createDirectory(atPath: config + "/glib-2.0/settings", withIntermediateDirectories: true)
        let settings = """
            [org/gnome/desktop/remote-access]
            prompt-enabled=false
            require-encryption=true
            authentication-methods=['vnc']
            vnc-password='\(Data(password.utf8).base64EncodedString())'
            use-alternative-port=true
            alternative-port=uint16 \(port)
            network-interface='lo'
            notify-on-connect=false
            icon-visibility='never'

            """
        try settings.write(toFile: config + "/glib-2.0/settings/keyfile", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: config + "/runtime", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = ":\(display)"
        environment["GSETTINGS_BACKEND"] = "keyfile"
        environment["XDG_CONFIG_HOME"] = config
        environment["XDG_RUNTIME_DIR"] = config + "/runtime"
        environment["HOME"] = config
        environment["NO_AT_BRIDGE"] = "1"
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        server = try BackgroundProcess(dbus, ["--", vino], environment: environment, logName: "vino", newSession: true)
        try waitForTCPPort(port, timeout: 30, process: server)
        try waitForRFBBanner(port, timeout: 30, process: server)
    }

    deinit {
        kill(-server.pid, SIGTERM)
        server.stop()
        usleep(100_000)
        kill(-server.pid, SIGKILL)
        xvfb.stop()
        removeStaleXFiles(display)
    }
}

/// The X server's own framebuffer, read with `xwd -root` and parsed (ZPixmap, 24/32 bpp).
struct XWDImage {
    let width: Int
    let height: Int
    /// 0x00RRGGBB per pixel.
    let pixels: [UInt32]

    static func captureRoot(of display: some XDisplay) throws -> XWDImage {
        try capture(of: display, arguments: ["-root", "-silent"])
    }

    /// One window's contents (`xwd -id`), without its frame.
    static func capture(window: String, of display: some XDisplay) throws -> XWDImage {
        try capture(of: display, arguments: ["-id", window, "-silent"])
    }

    private static func capture(of display: some XDisplay, arguments: [String]) throws -> XWDImage {
        let xwd = try requireExecutable("xwd", package: "x11-apps")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: xwd)
        process.arguments = arguments
        process.environment = display.environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return try XWDImage(Array(data))
    }

    struct Malformed: Error, CustomStringConvertible { var description: String }

    init(_ d: [UInt8]) throws {
        guard d.count >= 100 else { throw Malformed(description: "xwd output is \(d.count) bytes") }
        func field(_ i: Int) -> Int { Int(UInt32(d[i * 4]) << 24 | UInt32(d[i * 4 + 1]) << 16 | UInt32(d[i * 4 + 2]) << 8 | UInt32(d[i * 4 + 3])) }
        let headerSize = field(0), format = field(2), w = field(4), h = field(5), byteOrder = field(7)
        let bitsPerPixel = field(11), bytesPerLine = field(12), redMask = field(14), greenMask = field(15), blueMask = field(16), colours = field(19)
        guard format == 2, bitsPerPixel == 32, redMask == 0xFF0000, greenMask == 0xFF00, blueMask == 0xFF else {
            throw Malformed(description: "unsupported xwd layout: format \(format), \(bitsPerPixel) bpp, masks \(redMask)/\(greenMask)/\(blueMask)")
        }
        let start = headerSize + colours * 12
        guard d.count >= start + bytesPerLine * h else { throw Malformed(description: "xwd image data is short") }
        var px = [UInt32](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let o = start + y * bytesPerLine + x * 4
                let v = byteOrder == 0
                    ? UInt32(d[o]) | UInt32(d[o + 1]) << 8 | UInt32(d[o + 2]) << 16 | UInt32(d[o + 3]) << 24
                    : UInt32(d[o]) << 24 | UInt32(d[o + 1]) << 16 | UInt32(d[o + 2]) << 8 | UInt32(d[o + 3])
                px[y * w + x] = v & 0xFFFFFF
            }
        }
        width = w
        height = h
        pixels = px
    }
}

/// Decodes the 8-bit RGB PNGs farcast writes (any filter type), to compare with the screen.
func decodePNG(_ data: [UInt8]) throws -> (width: Int, height: Int, pixels: [UInt32]) {
    struct Bad: Error, CustomStringConvertible { var description: String }
    guard data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { throw Bad(description: "not a PNG") }
    var p = 8, width = 0, height = 0
    var idat: [UInt8] = []
    func u32(_ i: Int) -> Int { Int(data[i]) << 24 | Int(data[i + 1]) << 16 | Int(data[i + 2]) << 8 | Int(data[i + 3]) }
    while p + 8 <= data.count {
        let length = u32(p)
        let type = String(decoding: data[(p + 4)..<(p + 8)], as: UTF8.self)
        let body = Array(data[(p + 8)..<(p + 8 + length)])
        if type == "IHDR" {
            width = u32(p + 8)
            height = u32(p + 12)
            guard body[8] == 8, body[9] == 2 else { throw Bad(description: "not 8-bit RGB") }
        } else if type == "IDAT" {
            idat += body
        }
        p += 12 + length
    }
    let stride = 1 + width * 3
    var raw = [UInt8](repeating: 0, count: stride * height)
    var size = uLongf(raw.count)
    let status = raw.withUnsafeMutableBufferPointer { dst in idat.withUnsafeBufferPointer { uncompress(dst.baseAddress, &size, $0.baseAddress, uLong($0.count)) } }
    guard status == Z_OK, Int(size) == raw.count else { throw Bad(description: "PNG data does not inflate (status \(status))") }
    var out = [UInt8](repeating: 0, count: width * height * 3)
    for y in 0..<height {
        let filter = raw[y * stride]
        for i in 0..<(width * 3) {
            let x = raw[y * stride + 1 + i]
            let a = i >= 3 ? Int(out[y * width * 3 + i - 3]) : 0
            let b = y > 0 ? Int(out[(y - 1) * width * 3 + i]) : 0
            let c = i >= 3 && y > 0 ? Int(out[(y - 1) * width * 3 + i - 3]) : 0
            let predictor: Int
            switch filter {
            case 0: predictor = 0
            case 1: predictor = a
            case 2: predictor = b
            case 3: predictor = (a + b) / 2
            default:
                let pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c)
                predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
            }
            out[y * width * 3 + i] = UInt8(truncatingIfNeeded: Int(x) + predictor)
        }
    }
    var pixels = [UInt32](repeating: 0, count: width * height)
    for i in 0..<(width * height) {
        let r = UInt32(out[i * 3]), g = UInt32(out[i * 3 + 1]), b = UInt32(out[i * 3 + 2])
        pixels[i] = r << 16 | g << 8 | b
    }
    return (width, height, pixels)
}

/// TigerVNC ≥ 1.13's x0vncserver scraping an Xvfb display on 127.0.0.1: the peer for the RSA-AES
/// security types, which Debian's Xvnc 1.12 lacks. scripts/setup puts it in .peers/.
final class X0vncServer: XDisplay, @unchecked Sendable {
    let display: Int
    let port: Int
    let xvfb: BackgroundProcess
    private(set) var server: BackgroundProcess?
    let passwords: PasswordFiles

    static func binary() throws -> String {
        let path = packageRoot.appendingPathComponent(".peers/tigervnc/bin/x0vncserver").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw MissingPeer(what: "TigerVNC ≥ 1.13 x0vncserver at \(path) (scripts/setup fetches it through apt)")
        }
        return path
    }

    /// Makes a fresh 2048-bit RSA server key (PEM) with openssl.
    static func makeRSAKey(_ path: String) throws {
        let made = try run(try requireExecutable("openssl", package: "openssl"), ["genrsa", "-out", path, "2048"])
        guard made.status == 0 else { throw PeerFailed(name: "openssl genrsa", log: made.stderr) }
    }

    /// A server with a fresh RSA key and fresh password files in `folder` (what most tests want).
    static func start(securityTypes: String?, in folder: TemporaryFolder) throws -> (X0vncServer, PasswordFiles) {
        let passwords = try PasswordFiles(in: folder)
        let key = folder.path + "/rsa-\(UUID().uuidString.prefix(8)).pem"
        try makeRSAKey(key)
        return (try X0vncServer(securityTypes: securityTypes, rsaKey: key, passwords: passwords), passwords)
    }

    /// `securityTypes` nil leaves the server's default.
    init(geometry: String = "320x240", securityTypes: String?, rsaKey: String, passwords: PasswordFiles) throws {
        self.passwords = passwords
        display = DisplayNumbers.allocate()
        port = 5900 + DisplayNumbers.allocate()
        xvfb = try startXvfb(display: display, geometry: geometry)
        try start(securityTypes: securityTypes, rsaKey: rsaKey)
    }

    /// (Re)starts the VNC server on the same display and port, e.g. with another key.
    func start(securityTypes: String?, rsaKey: String) throws {
        server?.stop()
        // -interface alone: -localhost would add [::1] as well.
        var arguments = ["-display", ":\(display)", "-rfbport", "\(port)", "-interface", "127.0.0.1",
                         "-PasswordFile", passwords.tigervnc, "-RSAKey", rsaKey]
        if let securityTypes { arguments += ["-SecurityTypes", securityTypes] }
        let process = try BackgroundProcess(try Self.binary(), arguments, logName: "x0vncserver")
        server = process
        try waitForTCPPort(port, process: process)
    }

    deinit {
        server?.stop()
        xvfb.stop()
        removeStaleXFiles(display)
    }
}
