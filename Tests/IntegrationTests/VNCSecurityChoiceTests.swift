import FarcastSupport
import Foundation
import RFB
import Testing

/// Which security type farcast chooses against every configuration of the real servers here, and
/// that the login then succeeds: the table the default-TigerVNC failure called for. Each row
/// starts the server as a user would (defaults included), connects with farcast's default
/// preference unless the row says otherwise, and checks the types offered, the method chosen
/// and a complete first frame through it.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(8)))
struct VNCSecurityChoiceTests {
    /// One row: a server configuration and what must happen against it.
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var server: @Sendable (TemporaryFolder, PasswordFiles) throws -> (any XDisplay, AnyObject)
        var offered: [UInt8]
        var subtypes: [UInt32]
        var chosen: String
        var preference: [SecurityMethod]? = nil
        var username: String? = nil
        var passwordOverride: (@Sendable (TemporaryFolder) throws -> String)? = nil
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "Xvnc 1.12 default (TLSVnc,VncAuth)",
            server: { _, pw in let s = try XvncServer(securityTypes: nil, passwords: pw); return (s, s) },
            offered: [19, 2], subtypes: [258, 2], chosen: "TLSVnc"),
        Row(name: "Xvnc 1.12 default, VncAuth asked for (--security vncauth)",
            server: { _, pw in let s = try XvncServer(securityTypes: nil, passwords: pw); return (s, s) },
            offered: [19, 2], subtypes: [], chosen: "VncAuth", preference: [.vncAuth]),
        Row(name: "Xvnc 1.12 VncAuth",
            server: { _, pw in let s = try XvncServer(securityTypes: "VncAuth", passwords: pw); return (s, s) },
            offered: [2], subtypes: [], chosen: "VncAuth"),
        // VeNCrypt is entered for the X509 methods first; it holds Plain (never tried unless
        // listed) and VncAuth, which Xvnc lists inside it too: VncAuth is taken there.
        Row(name: "Xvnc 1.12 Plain,VncAuth: Plain passed over, VncAuth inside VeNCrypt",
            server: { _, pw in let s = try XvncServer(securityTypes: "Plain,VncAuth", passwords: pw); return (s, s) },
            offered: [19, 2], subtypes: [256, 2], chosen: "VncAuth"),
        Row(name: "Xvnc 1.12 TLSVnc alone",
            server: { _, pw in let s = try XvncServer(securityTypes: "TLSVnc", passwords: pw); return (s, s) },
            offered: [19], subtypes: [258], chosen: "TLSVnc"),
        Row(name: "Xvnc 1.12 TLSNone alone",
            server: { _, pw in let s = try XvncServer(securityTypes: "TLSNone", passwords: pw); return (s, s) },
            offered: [19], subtypes: [257], chosen: "TLSNone"),
        Row(name: "Xvnc 1.12 TLSNone,VncAuth",
            server: { _, pw in let s = try XvncServer(securityTypes: "TLSNone,VncAuth", passwords: pw); return (s, s) },
            offered: [19, 2], subtypes: [257, 2], chosen: "TLSNone"),
        Row(name: "Xvnc 1.12 X509Vnc,TLSVnc,X509Plain,TLSNone,VncAuth with a certificate",
            server: { folder, pw in
                let certificate = try TestCertificate(name: "xvnc", in: folder)
                let s = try XvncServer(securityTypes: "X509Vnc,TLSVnc,X509Plain,TLSNone,VncAuth", passwords: pw,
                                       extra: ["-X509Cert", certificate.cert, "-X509Key", certificate.key])
                return (s, s)
            },
            offered: [19, 2], subtypes: [261, 258, 262, 257, 2], chosen: "X509Vnc"),
        Row(name: "Xvnc 1.12 Plain with a PAM user (--security plain)",
            server: { folder, pw in
                let s = try XvncServer(securityTypes: "Plain", passwords: pw, pamUser: try PAMUser(in: folder))
                return (s, s)
            },
            offered: [19], subtypes: [256], chosen: "Plain", preference: [.plain], username: "fcplain",
            passwordOverride: { _ in "pläin pass" }),
        Row(name: "Xvnc 1.12 TLSPlain with a PAM user (--security tlsplain)",
            server: { folder, pw in
                let s = try XvncServer(securityTypes: "TLSPlain", passwords: pw, pamUser: try PAMUser(in: folder))
                return (s, s)
            },
            offered: [19], subtypes: [259], chosen: "TLSPlain", preference: [.tlsPlain], username: "fcplain",
            passwordOverride: { _ in "pläin pass" }),
        Row(name: "Xvnc 1.12 X509Plain with a PAM user",
            server: { folder, pw in
                let certificate = try TestCertificate(name: "xvnc-plain", in: folder)
                let s = try XvncServer(securityTypes: "X509Plain", passwords: pw, pamUser: try PAMUser(in: folder),
                                       extra: ["-X509Cert", certificate.cert, "-X509Key", certificate.key])
                return (s, s)
            },
            offered: [19], subtypes: [262], chosen: "X509Plain", username: "fcplain", passwordOverride: { _ in "pläin pass" }),
        Row(name: "x0vncserver 1.15 default",
            server: { folder, pw in
                let key = folder.path + "/rsa.pem"
                try X0vncServer.makeRSAKey(key)
                let s = try X0vncServer(securityTypes: nil, rsaKey: key, passwords: pw)
                return (s, s)
            },
            offered: [19, 2], subtypes: [258, 2], chosen: "TLSVnc"),
        Row(name: "x11vnc 0.9.16 -rfbauth",
            server: { folder, pw in let s = try X11vncServer(password: pw.password, folder: folder); return (s, s) },
            offered: [2], subtypes: [], chosen: "VncAuth"),
        Row(name: "x11vnc 0.9.16 -ssl TMP (VeNCrypt and ANONTLS)",
            server: { folder, pw in
                let s = try X11vncServer(password: pw.password, folder: folder, extra: ["-ssl", "TMP"], startupTimeout: 60)
                return (s, s)
            },
            offered: [19, 18], subtypes: [258, 261], chosen: "X509Vnc"),
        Row(name: "x11vnc 0.9.16 -ssl TMP without a password",
            server: { folder, _ in
                let s = try X11vncServer(password: nil, folder: folder, extra: ["-ssl", "TMP"], startupTimeout: 60)
                return (s, s)
            },
            offered: [19, 18], subtypes: [257, 260], chosen: "X509None"),
        Row(name: "x11vnc 0.9.16 -ssl TMP -vencrypt nodh:only -anontls never (X509 only)",
            server: { folder, pw in
                let s = try X11vncServer(password: pw.password, folder: folder,
                                         extra: ["-ssl", "TMP", "-vencrypt", "nodh:only", "-anontls", "never"], startupTimeout: 60)
                return (s, s)
            },
            offered: [19], subtypes: [261], chosen: "X509Vnc"),
        // -unixpw checks the login with su(1), typing the password into it: a user with a shell,
        // and an ASCII password (a UTF-8 one fails inside x11vnc's su exchange; Xvnc's Plain
        // rows above show farcast sends UTF-8 correctly).
        Row(name: "x11vnc 0.9.16 -unixpw -ssl TMP -vencrypt plain:support with a Unix user",
            server: { folder, _ in
                let user = try PAMUser(password: "x11vnc plain", shell: "/bin/sh", in: folder)
                let s = try X11vncServer(password: nil, folder: folder, extra: ["-unixpw", "-ssl", "TMP", "-vencrypt", "plain:support"],
                                         startupTimeout: 60, pamUser: user)
                return (s, s)
            },
            offered: [19, 18], subtypes: [259, 262], chosen: "X509Plain", username: "fcplain",
            passwordOverride: { _ in "x11vnc plain" }),
        // x11vnc's anonymous suites need OpenSSL's security level lowered (see X11vncServer).
        Row(name: "x11vnc 0.9.16 -ssl TMP -vencrypt nox509:support (anonymous only)",
            server: { folder, pw in
                let s = try X11vncServer(password: pw.password, folder: folder, extra: ["-ssl", "TMP", "-vencrypt", "nox509:support"],
                                         startupTimeout: 60, anonymousTLS: true)
                return (s, s)
            },
            offered: [19, 18], subtypes: [258], chosen: "TLSVnc"),
        Row(name: "x11vnc 0.9.16 -ssl TMP -vencrypt never (the older TLS type 18 alone)",
            server: { folder, pw in
                let s = try X11vncServer(password: pw.password, folder: folder, extra: ["-ssl", "TMP", "-vencrypt", "never"],
                                         startupTimeout: 60, anonymousTLS: true)
                return (s, s)
            },
            offered: [18], subtypes: [], chosen: "AnonTLS"),
        Row(name: "vino 3.22 require-encryption, VNC password (the older TLS type 18)",
            server: { folder, pw in let s = try VinoServer(password: pw.password, folder: folder); return (s, s) },
            offered: [18], subtypes: [], chosen: "AnonTLS"),
        Row(name: "TightVNC 1.3.10 with a password",
            server: { _, pw in let s = try TightVNCServer(passwords: pw); return (s, s) },
            offered: [2, 16], subtypes: [], chosen: "VncAuth"),
        Row(name: "TightVNC 1.3.10 with a password, Tight asked for (--security tight)",
            server: { _, pw in let s = try TightVNCServer(passwords: pw); return (s, s) },
            offered: [2, 16], subtypes: [], chosen: "Tight", preference: [.tight]),
        Row(name: "TightVNC 1.3.10 without a password, Tight asked for (--security tight)",
            server: { _, _ in let s = try TightVNCServer(passwords: nil); return (s, s) },
            offered: [1, 16], subtypes: [], chosen: "Tight", preference: [.tight]),
        Row(name: "QEMU 7.2 without authentication",
            server: { folder, _ in let s = try QEMUVNCServer(folder: folder); return (s, s) },
            offered: [1], subtypes: [], chosen: "None"),
        Row(name: "QEMU 7.2 password",
            server: { folder, pw in
                let s = try QEMUVNCServer(folder: folder, vncOptions: ",password-secret=pw", objects: ["secret,id=pw,data=\(pw.password)"])
                return (s, s)
            },
            offered: [2], subtypes: [], chosen: "VncAuth"),
        Row(name: "QEMU 7.2 anonymous TLS (tls-creds-anon)",
            server: { folder, _ in
                let s = try QEMUVNCServer(folder: folder, vncOptions: ",tls-creds=tls0", objects: ["tls-creds-anon,id=tls0,endpoint=server"])
                return (s, s)
            },
            offered: [19], subtypes: [257], chosen: "TLSNone"),
        Row(name: "QEMU 7.2 anonymous TLS and a password",
            server: { folder, pw in
                let s = try QEMUVNCServer(folder: folder, vncOptions: ",tls-creds=tls0,password-secret=pw",
                                          objects: ["tls-creds-anon,id=tls0,endpoint=server", "secret,id=pw,data=\(pw.password)"])
                return (s, s)
            },
            offered: [19], subtypes: [258], chosen: "TLSVnc"),
        Row(name: "QEMU 7.2 x509 (tls-creds-x509)",
            server: { folder, _ in
                let pki = try TestPKI(in: folder)
                let s = try QEMUVNCServer(folder: folder, vncOptions: ",tls-creds=tls0",
                                          objects: ["tls-creds-x509,id=tls0,dir=\(pki.directory),endpoint=server,verify-peer=no"])
                return (s, s)
            },
            offered: [19], subtypes: [260], chosen: "X509None"),
        Row(name: "QEMU 7.2 x509 and a password",
            server: { folder, pw in
                let pki = try TestPKI(in: folder)
                let s = try QEMUVNCServer(folder: folder, vncOptions: ",tls-creds=tls0,password-secret=pw",
                                          objects: ["tls-creds-x509,id=tls0,dir=\(pki.directory),endpoint=server,verify-peer=no",
                                                    "secret,id=pw,data=\(pw.password)"])
                return (s, s)
            },
            offered: [19], subtypes: [261], chosen: "X509Vnc"),
    ]

    @Test(arguments: rows)
    func chosenTypeAndLogin(_ row: Row) async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let (server, keepAlive) = try row.server(folder, passwords)
        defer { withExtendedLifetime(keepAlive) {} }
        var options = VNCClient.Options()
        options.trustStore = TrustStore(directory: StateDirectory(path: folder.path + "/state"), fileName: "vnc/pins.json")
        if let preference = row.preference { options.configuration.securityPreference = preference }
        let password = try row.passwordOverride?(folder) ?? passwords.password
        let username = row.username
        let client = try await VNCClient.connect(to: server.endpoint, credentials: { request in
            VNCCredentials(username: request.needsUsername ? username : nil, password: password)
        }, options: options)
        let info = await client.serverInfo
        #expect(info?.securityTypes.map(\.rawValue) == row.offered, "\(row.name): offered \(String(describing: info?.securityTypes))")
        #expect(info?.veNCryptSubtypes == row.subtypes, "\(row.name): subtypes \(String(describing: info?.veNCryptSubtypes))")
        #expect(info?.security == row.chosen, "\(row.name): chose \(String(describing: info?.security))")
        try await client.waitForFirstFrame(timeout: .seconds(20))
        await client.close()
    }

    /// VeNCrypt is entered for the first preferred method that can only live inside it, and its
    /// subtypes show only then. Against x11vnc offering VeNCrypt with nothing but TLSVnc inside
    /// and the older type 18 beside it, `--security x509vnc,anontls` finds no X509 subtype, and
    /// the client connects again without VeNCrypt and completes type 18. With `--security
    /// x509vnc` alone there is nothing to fall back to: the failure names what would work.
    @Test func veNCryptWithNothingUsableInsideReconnectsWithoutIt() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try X11vncServer(password: passwords.password, folder: folder, extra: ["-ssl", "TMP", "-vencrypt", "nox509:support"],
                                      startupTimeout: 60, anonymousTLS: true)
        let environment = ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"]
        let fallback = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", passwords.plain,
                                                    "--security", "x509vnc,anontls", "--json", "-v"],
                               environment: environment, timeout: 60)
        #expect(fallback.status == 0, "stderr: \(fallback.stderr)")
        #expect(fallback.stdout.contains("\"security\":\"AnonTLS\""), "stdout: \(fallback.stdout)")
        #expect(fallback.stderr.contains("VeNCrypt offered nothing usable; connecting again without it")
                && fallback.stderr.contains("TLSVnc(258)"), "stderr: \(fallback.stderr)")
        let nothing = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", passwords.plain,
                                                   "--security", "x509vnc"],
                              environment: environment, timeout: 60)
        #expect(nothing.status == 1, "stdout: \(nothing.stdout) stderr: \(nothing.stderr)")
        #expect(nothing.stderr.contains("TLSVnc") && nothing.stderr.contains("--security") && nothing.stderr.contains("tlsvnc"),
                "stderr: \(nothing.stderr)")
    }

    /// Debian's x11vnc 0.9.16 as it starts by default under OpenSSL 3 refuses every anonymous
    /// suite (its log: "no shared cipher"): the failure says so and what to do about it, for
    /// the VeNCrypt subtype and for type 18 alike.
    @Test func anAnonymousTLSServerRefusingEverySuiteIsExplained() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try X11vncServer(password: passwords.password, folder: folder, extra: ["-ssl", "TMP", "-vencrypt", "nox509:support"],
                                      startupTimeout: 60)
        for security in ["tlsvnc", "anontls"] {
            let result = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", passwords.plain,
                                                      "--security", security],
                                 environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 60)
            #expect(result.status == 1, "\(security): stdout: \(result.stdout) stderr: \(result.stderr)")
            #expect(result.stderr.contains("accepted none of the anonymous cipher suites") && result.stderr.contains("@SECLEVEL=0")
                    && result.stderr.contains("x509vnc"), "\(security): stderr: \(result.stderr)")
        }
    }

    /// The first-contact failure as a user met it: `farcast vnc info` against Xvnc started with
    /// no -SecurityTypes, with the right password, logs in (it used to report "authentication
    /// failed").
    @Test func infoAgainstADefaultXvncLogsIn() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(securityTypes: nil, passwords: passwords)
        let result = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", passwords.plain, "--json"],
                             environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 30)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        // TLSVnc: anonymous TLS, then VNC authentication inside it; info says that nothing proved
        // who the server is, in JSON and in text.
        #expect(result.stdout.contains("\"security\":\"TLSVnc\""), "stdout: \(result.stdout)")
        #expect(result.stdout.contains("\"anonymous_tls\":true"), "stdout: \(result.stdout)")
        let text = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", passwords.plain],
                           environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 30)
        #expect(text.status == 0, "stderr: \(text.stderr)")
        #expect(text.stdout.contains("anonymous TLS") && text.stdout.contains("man in the middle"), "stdout: \(text.stdout)")
        // With a certificate-free method chosen on purpose, no such note.
        let plain = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", passwords.plain,
                                                  "--security", "vncauth", "--json"],
                            environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 30)
        #expect(plain.status == 0 && !plain.stdout.contains("anonymous_tls"), "stdout: \(plain.stdout) stderr: \(plain.stderr)")
    }

    /// A server that wants a user name, none given and no terminal to ask on: the message names
    /// the three places a user name comes from, not the password options.
    @Test func aMissingUserNameSaysWhereOneComesFrom() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(securityTypes: "Plain", passwords: passwords, pamUser: try PAMUser(in: folder))
        let result = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--security", "plain", "--password-file", passwords.plain],
                             environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 30)
        #expect(result.status == 1, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("user name") && result.stderr.contains("--username") && result.stderr.contains("vnc://USER@HOST")
                && result.stderr.contains("FARCAST_VNC_USERNAME"), "stderr: \(result.stderr)")
        #expect(!result.stderr.contains("--password-file"), "stderr: \(result.stderr)")
    }

    /// A server that verifies clients (x11vnc -ssl -sslverify, like QEMU's verify-peer): the
    /// certificate given with --client-cert/--client-key logs in; without one, or with one the
    /// server does not know, the failure says which; a key that is not the certificate's is
    /// refused before connecting (exit 2).
    @Test func clientCertificatesForServersThatVerifyThem() throws {
        let folder = try TemporaryFolder()
        let mine = try TestCertificate(name: "client", in: folder, subject: "/CN=farcast-client")
        let stranger = try TestCertificate(name: "stranger", in: folder, subject: "/CN=stranger")
        let server = try X11vncServer(password: nil, folder: folder, extra: ["-ssl", "TMP", "-sslverify", mine.cert], startupTimeout: 60)
        func info(_ extra: [String]) throws -> ProcessResult {
            try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--json"] + extra,
                    environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 60)
        }
        let accepted = try info(["--client-cert", mine.cert, "--client-key", mine.key])
        #expect(accepted.status == 0, "stderr: \(accepted.stderr)")
        #expect(accepted.stdout.contains("\"security\":\"X509None\"") || accepted.stdout.contains("\"security\":\"X509Vnc\""),
                "stdout: \(accepted.stdout)")
        let without = try info([])
        #expect(without.status == 1)
        #expect(without.stderr.contains("requires a client certificate") && without.stderr.contains("--client-cert"), "stderr: \(without.stderr)")
        let unknown = try info(["--client-cert", stranger.cert, "--client-key", stranger.key])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("unknown ca"), "stderr: \(unknown.stderr)")
        let mismatched = try info(["--client-cert", mine.cert, "--client-key", stranger.key])
        #expect(mismatched.status == 2)
        #expect(mismatched.stderr.contains("does not belong to the certificate"), "stderr: \(mismatched.stderr)")
    }

    /// QEMU with verify-peer=yes (GnuTLS, which hangs up without an alert when a client shows no
    /// certificate): the certificate its CA signed logs in; without one the failure points at
    /// --client-cert, and the server's certificate is not pinned by the refused attempt.
    @Test func qemuVerifyingClientsAcceptsOurCertificateAndPinsNothingWhenItRefuses() throws {
        let folder = try TemporaryFolder()
        let pki = try TestPKI(in: folder)
        let server = try QEMUVNCServer(folder: folder, vncOptions: ",tls-creds=tls0",
                                       objects: ["tls-creds-x509,id=tls0,dir=\(pki.directory),endpoint=server,verify-peer=yes"])
        let state = folder.path + "/state"
        func info(_ extra: [String]) throws -> ProcessResult {
            try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--json"] + extra,
                    environment: ["XDG_STATE_HOME": state, "PATH": "/usr/bin:/bin"], timeout: 60)
        }
        let pins = state + "/farcast/vnc/pins.json"
        let without = try info([])
        #expect(without.status == 1)
        #expect(without.stderr.contains("requires one") && without.stderr.contains("--client-cert"), "stderr: \(without.stderr)")
        #expect(!FileManager.default.fileExists(atPath: pins) || !((try? String(contentsOfFile: pins, encoding: .utf8)) ?? "").contains("\(server.port)"),
                "the refused attempt pinned nothing")
        let accepted = try info(["--client-cert", pki.clientCert, "--client-key", pki.clientKey])
        #expect(accepted.status == 0, "stderr: \(accepted.stderr)")
        #expect(accepted.stdout.contains("\"security\":\"X509None\""), "stdout: \(accepted.stdout)")
        let pinned = (try? String(contentsOfFile: pins, encoding: .utf8)) ?? ""
        #expect(pinned.contains("127.0.0.1:\(server.port)"), "the completed login pinned the server: \(pinned)")
    }

    /// x11vnc -sslonly speaks TLS from the first byte (as servers behind stunnel do): a vncs://
    /// address (or --tls-first) logs in; a plain vnc:// address gets the hint to use one.
    @Test func tlsFromTheFirstByteWithVncsAddresses() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try X11vncServer(password: passwords.password, folder: folder, extra: ["-ssl", "TMP", "-sslonly"],
                                      startupTimeout: 60, tlsFromTheFirstByte: true)
        func info(_ address: String, _ extra: [String] = [], timeout: Int = 15) throws -> ProcessResult {
            try run(try farcastBinary(), ["vnc", "info", address, "--password-file", passwords.plain, "--json", "--timeout", "\(timeout)"] + extra,
                    environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 60)
        }
        // x11vnc -sslonly listens before its TLS setup is ready and resets connections until it
        // is: the first successful greeting is the readiness signal (up to 4 tries, 3 s apart).
        var viaURL = try info("vncs://127.0.0.1:\(server.port)")
        for _ in 0..<3 where viaURL.status != 0 && viaURL.stderr.contains("reset by peer") {
            sleep(3)
            viaURL = try info("vncs://127.0.0.1:\(server.port)")
        }
        #expect(viaURL.status == 0, "stderr: \(viaURL.stderr)")
        #expect(viaURL.stdout.contains("\"security\":\"VncAuth\""), "stdout: \(viaURL.stdout)")
        let viaFlag = try info("127.0.0.1::\(server.port)", ["--tls-first"])
        #expect(viaFlag.status == 0, "stderr: \(viaFlag.stderr)")
        let plain = try info("vnc://127.0.0.1:\(server.port)", timeout: 3)
        #expect(plain.status == 1)
        #expect(plain.stderr.contains("vncs://"), "stderr: \(plain.stderr)")
    }

    /// x11vnc in -unixpw mode with VeNCrypt Plain (`-vencrypt plain:support`) checks the user
    /// name and password as a Unix login; when that fails it sends the text "unixpw failed"
    /// where the SecurityResult's failure reason (a length, then text) belongs. The client says
    /// the login failed and that the server's message was malformed — not that a reason of
    /// 1970170232 bytes ("unix" read as a length) is coming — and ends at once.
    @Test func x11vncUnixLoginFailureIsAFailedLoginNotAHugeReason() throws {
        let folder = try TemporaryFolder()
        let server = try X11vncServer(password: nil, folder: folder, extra: ["-unixpw", "-ssl", "TMP", "-vencrypt", "plain:support"],
                                      startupTimeout: 60)
        let passwordFile = folder.path + "/wrong-password"
        try "not the password".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        func attempt() throws -> (ProcessResult, TimeInterval) {
            let started = Date()
            let result = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--username", "nosuchuser",
                                                      "--password-file", passwordFile, "--timeout", "15"],
                                 environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 60)
            return (result, Date().timeIntervalSince(started))
        }
        // x11vnc hands each TLS connection to a forked helper; on a loaded CI machine a helper
        // once closed the connection mid-handshake (CI run of stop 44). That is x11vnc's TLS
        // set-up, not the failure message this test is about: try again (up to twice), and
        // show x11vnc's log if it still happens.
        var (result, took) = try attempt()
        for _ in 0..<2 where result.stderr.contains("during the TLS handshake") {
            sleep(2)
            (result, took) = try attempt()
        }
        let serverLog = String(server.server.log.suffix(3000))
        #expect(result.status == 1, "stdout: \(result.stdout) stderr: \(result.stderr)\nx11vnc: \(serverLog)")
        #expect(result.stderr.contains("authentication failed: the server's failure message was malformed"),
                "stderr: \(result.stderr)\nx11vnc: \(serverLog)")
        #expect(!result.stderr.contains("bytes"), "stderr: \(result.stderr)")
        #expect(took < 20, "the refusal took \(took) s")
    }

    /// Plain with the wrong password: the server's refusal, promptly (it used to hang 30 s
    /// waiting for an acknowledgement byte Xvnc never sends).
    @Test func plainWithAWrongPasswordIsRefusedPromptly() async throws {
        let folder = try TemporaryFolder()
        let server = try XvncServer(securityTypes: "Plain", passwords: nil, pamUser: try PAMUser(in: folder))
        var options = VNCClient.Options()
        options.configuration.securityPreference = [.plain]
        let started = ContinuousClock.now
        do {
            let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in
                VNCCredentials(username: "fcplain", password: "not the password")
            }, options: options)
            await client.close()
            Issue.record("a wrong Plain password was accepted")
        } catch let error as RFBError {
            guard case .authenticationFailed = error else { Issue.record("expected authenticationFailed, got \(error)"); return }
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}
