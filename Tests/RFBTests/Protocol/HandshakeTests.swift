import FarcastSupport
@testable import RFB
import Testing

/// The handshake as byte vectors: versions, every security path, failures with the server's
/// reason, and what the client sends at each step.
@Suite struct HandshakeTests {
    private func reason(_ text: String) -> [UInt8] {
        var w = ByteWriter()
        w.writeInteger(UInt32(text.utf8.count))
        w.writeUTF8(text)
        return w.bytes
    }

    private func serverInit(_ width: Int = 4, _ height: Int = 3, name: String = "desk") -> [UInt8] {
        var s = ServerScript()
        s.serverInit(width: width, height: height, name: name)
        return s.bytes
    }

    @Test func version38WithNoneReachesReadyAndRequestsTheFirstFrame() throws {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8))
        #expect(h.sent == [Array("RFB 003.008\n".utf8)])
        h.feed([2, 2, 1])                // two types offered: VncAuth, None (default prefers VncAuth…)
        // …but no password is known yet: the client asks for one.
        #expect(h.sent.last == [2])
        #expect(h.actions.contains { if case .requestCredentials(let r) = $0 { return r.method == .vncAuth } else { return false } })
    }

    @Test func noneSecurityFollowsThePreferenceOrder() throws {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.none, .vncAuth]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [2, 2, 1])
        #expect(h.sent[1] == [1])
        h.feed([0, 0, 0, 0])             // SecurityResult OK (3.8 sends it even for None)
        #expect(h.sent[2] == [1])        // ClientInit, shared
        h.feed(serverInit(name: "büro"))
        let sent = h.sent
        #expect(sent[3] == ClientMessage.setPixelFormat(.rgb888).encoded())
        #expect(sent[4].first == 2)      // SetEncodings
        #expect(sent[5] == ClientMessage.framebufferUpdateRequest(incremental: false, RFBRect(x: 0, y: 0, width: 4, height: 3)).encoded())
        let ready = h.actions.compactMap { if case .ready(let info) = $0 { return info } else { return nil } }.first
        #expect(ready?.name == "büro")
        #expect(ready?.protocolVersion == "3.8")
        #expect(ready?.securityTypes == [SecurityType.vncAuth, .noAuthentication])
        #expect(h.connection.isReady == true)
    }

    @Test func vncAuthenticationAnswersTheChallengeOnceThePasswordArrives() throws {
        var h = Harness()
        let challenge = Array(0..<16 as Range<UInt8>)
        // Banner, security list and challenge arrive together before the password is known.
        h.feed(Array("RFB 003.008\n".utf8) + [1, 2] + challenge)
        #expect(h.sent.count == 2)
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "secret12"))
        #expect(h.sent.last == VNCAuthentication.response(challenge: challenge, password: "secret12"))
        h.feed([0, 0, 0, 0])
        #expect(h.sent.last == [1])
        // Credentials are requested exactly once.
        #expect(h.actions.filter { if case .requestCredentials = $0 { return true } else { return false } }.count == 1)
    }

    @Test func wrongPasswordSurfacesTheServersReason() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [1, 2] + [UInt8](repeating: 7, count: 16))
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "nope"))
        h.feed([0, 0, 0, 1] + reason("Authentication failure"))
        #expect(h.closeError == .authenticationFailed(reason: "Authentication failure"))
        #expect(h.connection.isClosed == true)
    }

    @Test func version33ServerChoosesTheType() {
        var h = Harness()
        h.feed(Array("RFB 003.003\n".utf8))
        #expect(h.sent == [Array("RFB 003.003\n".utf8)])
        h.feed([0, 0, 0, 2] + [UInt8](repeating: 1, count: 16))
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "pw"))
        #expect(h.sent.count == 2 && h.sent[1].count == 16)
        // 3.3 failure carries no reason.
        h.feed([0, 0, 0, 1])
        if case .authenticationFailed(let text)? = h.closeError {
            #expect(text.contains("give no reason"))
        } else {
            Issue.record("expected authenticationFailed, got \(String(describing: h.closeError))")
        }
    }

    @Test func version33RefusalCarriesAReason() {
        var h = Harness()
        h.feed(Array("RFB 003.003\n".utf8) + [0, 0, 0, 0] + reason("Too many security failures"))
        #expect(h.closeError == .serverRefused(reason: "Too many security failures"))
    }

    /// A reason is shown as text a terminal can take: C0 controls (an escape sequence, QEMU's
    /// trailing NUL), DEL and C1 controls dropped, other Unicode kept, spaces around trimmed.
    @Test func reasonsLoseEveryControlCharacter() {
        var h = Harness()
        let hostile = Array(" Zu viele \u{1B}[2JFehlversuche\u{7F}\u{85} — später ".utf8) + [0]
        var w = ByteWriter()
        w.writeInteger(UInt32(hostile.count))
        h.feed(Array("RFB 003.003\n".utf8) + [0, 0, 0, 0] + w.bytes + hostile)
        #expect(h.closeError == .serverRefused(reason: "Zu viele [2JFehlversuche — später"))
    }

    @Test func version37NoneSkipsTheSecurityResult() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.none]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.007\n".utf8) + [1, 1])
        #expect(h.sent == [Array("RFB 003.007\n".utf8), [1], [1]])
        h.feed(serverInit())
        #expect(h.connection.isReady == true)
    }

    @Test(arguments: [("RFB 003.889\n", "RFB 003.008\n"), ("RFB 003.005\n", "RFB 003.003\n"), ("RFB 004.001\n", "RFB 003.008\n"),
                      ("RFB 003.006\n", "RFB 003.003\n")])
    func versionMapping(server: String, reply: String) {
        var h = Harness()
        h.feed(Array(server.utf8))
        #expect(h.sent.first == Array(reply.utf8))
    }

    @Test func appleBannerIsSpokenAs38() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.none]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.889\n".utf8) + [2, 30, 1] + [0, 0, 0, 0] + serverInit())
        #expect(h.connection.isReady == true)
        #expect(h.connection.serverInfo?.protocolVersion == "3.8")
        #expect(h.connection.serverInfo?.banner == "RFB 003.889")
    }

    @Test(arguments: ["HTTP/1.1 400", "SSH-2.0-Open", "RFB 003.00x\n", "RFB 002.000\n"])
    func notRFBIsRefused(banner: String) {
        var h = Harness()
        h.feed(Array((banner + String(repeating: " ", count: 12)).utf8.prefix(12)))
        switch h.closeError {
        case .notAnRFBServer?, .unsupportedVersion?: break
        default: Issue.record("expected a banner error, got \(String(describing: h.closeError))")
        }
    }

    @Test func aWrongServerIsNamedByItsGreeting() {
        var h = Harness()
        h.feed(Array("SSH-2.0-OpenSSH_9.2p1\r\n".utf8))
        let message = h.closeError.map { "\($0)" } ?? ""
        #expect(message.contains("an SSH server"), "\(message)")
        #expect(message.contains("SSH-2.0-Open"), "\(message)")
        #expect(h.connection.handshakeStep == nil)
    }

    @Test func theHandshakeSaysWhatItWaitsFor() {
        var h = Harness()
        #expect(h.connection.handshakeStep == "its RFB banner")
        h.feed(Array("RFB 003.008\n".utf8))
        #expect(h.connection.handshakeStep == "its list of security types")
        #expect(h.connection.bytesReceived == 12)
    }

    /// One Tight capability: code, 4-byte vendor, 8-byte name.
    private func capability(_ code: UInt32, _ vendor: String, _ name: String) -> [UInt8] {
        var w = ByteWriter()
        w.writeInteger(code)
        return w.bytes + Array(vendor.utf8) + Array(name.utf8)
    }

    @Test func tightSecurityTakesNoTunnelThenVNCAuthenticationAndReadsTheCapabilitiesInServerInit() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.tight]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [2, 2, 16])
        #expect(h.sent.last == [16])
        // One tunnel type (no tunnel), chosen by code 0; then VNC Authentication among two.
        h.feed([0, 0, 0, 1] + capability(0, "TGHT", "NOTUNNEL"))
        #expect(h.sent.last == [0, 0, 0, 0])
        h.feed([0, 0, 0, 2] + capability(1, "STDV", "NOAUTH__") + capability(2, "STDV", "VNCAUTH_"))
        #expect(h.sent.last == [0, 0, 0, 2])
        #expect(h.actions.contains { if case .requestCredentials(let r) = $0 { r.method == .tight } else { false } })
        let challenge = [UInt8](repeating: 7, count: 16)
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "pw"))
        h.feed(challenge)
        #expect(h.sent.last == VNCAuthentication.response(challenge: challenge, password: "pw"))
        h.feed([0, 0, 0, 0])
        #expect(h.sent.last == [1])
        // ServerInit, then Tight's interaction capabilities: 1 server message, 0 client, 2 encodings.
        h.feed(serverInit(name: "tight") + [0, 1, 0, 0, 0, 2, 0, 0] + capability(130, "TGHT", "FTS_LSDA")
               + capability(7, "TGHT", "TIGHT___") + capability(16, "TRDV", "ZRLE____"))
        #expect(h.connection.isReady == true)
        #expect(h.connection.serverInfo?.security == "Tight")
        #expect(h.connection.tightEncodingCapabilities == ["TGHTTIGHT___", "TRDVZRLE____"])
    }

    @Test func tightSecurityWithNoAuthenticationGoesStraightOn() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.tight]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [2, 1, 16] + [0, 0, 0, 0] + [0, 0, 0, 0])
        #expect(h.sent.last == [16], "no tunnel list, no authentication list: nothing to answer")
        h.feed([0, 0, 0, 0])             // SecurityResult OK
        #expect(h.sent.last == [1])
        h.feed(serverInit() + [0, 0, 0, 0, 0, 0, 0, 0])
        #expect(h.connection.isReady == true)
    }

    @Test func tightSecurityRefusesHostileCountsAndRequiredTunnels() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.tight]
        var hostile = Harness(configuration: configuration)
        hostile.feed(Array("RFB 003.008\n".utf8) + [1, 16] + [0xFF, 0xFF, 0xFF, 0xFF])
        guard case .protocolViolation(let detail)? = hostile.closeError else {
            Issue.record("expected a protocol violation, got \(String(describing: hostile.closeError))")
            return
        }
        #expect(detail.contains("4294967295"))
        var tunnel = Harness(configuration: configuration)
        tunnel.feed(Array("RFB 003.008\n".utf8) + [1, 16] + [0, 0, 0, 1] + capability(1, "SICR", "SCHANNEL"))
        guard case .unsupported(let message)? = tunnel.closeError else {
            Issue.record("expected unsupported, got \(String(describing: tunnel.closeError))")
            return
        }
        #expect(message.contains("requires a tunnel") && message.contains("SICRSCHANNEL"))
    }

    @Test func serverRefusalBeforeSecurityCarriesItsReason() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [0] + reason("server is shutting down"))
        #expect(h.closeError == .serverRefused(reason: "server is shutting down"))
    }

    @Test func noCommonSecurityTypeNamesBothSidesAndAHint() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.none]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [2, 2, 5])
        guard case .noCommonSecurityType(let offered, let accepted, let hint)? = h.closeError else {
            Issue.record("expected noCommonSecurityType, got \(String(describing: h.closeError))")
            return
        }
        #expect(offered == ["VncAuth(2)", "RA2(5)"])
        #expect(accepted == ["None"])
        #expect(hint == "--security vncauth,ra2 would work")
    }

    /// Only VeNCrypt offered and only top-level types accepted: its subtypes are unknown until
    /// it is chosen, so the hint names the methods that live inside it.
    @Test func aVeNCryptOnlyServerGetsAHintToo() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.vncAuth]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [1, 19])
        guard case .noCommonSecurityType(let offered, _, let hint)? = h.closeError else {
            Issue.record("expected noCommonSecurityType, got \(String(describing: h.closeError))")
            return
        }
        #expect(offered == ["VeNCrypt(19)"])
        #expect(hint?.contains("VeNCrypt") == true && hint?.contains("x509vnc") == true && hint?.contains("plain") == true, "\(String(describing: hint))")
    }

    @Test func veNCryptX509VncStartsTLSThenAuthenticatesInside() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [3, 19, 2, 5])
        #expect(h.sent.last == [19])
        h.feed([0, 2])
        #expect(h.sent.last == [0, 2])
        h.feed([0])
        h.feed([3, 0, 0, 1, 5, 0, 0, 1, 2, 0, 0, 0, 2])     // X509Vnc(261), TLSVnc(258), VncAuth(2)
        #expect(h.sent.last == [0, 0, 1, 5])
        h.feed([1])
        #expect(h.actions.contains { if case .startTLS = $0 { return true } else { return false } })
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "secret12"))
        h.actions += h.connection.tlsEstablished()
        let challenge = [UInt8](repeating: 0xAB, count: 16)
        h.feed(challenge)
        #expect(h.sent.last == VNCAuthentication.response(challenge: challenge, password: "secret12"))
        h.feed([0, 0, 0, 0] + serverInit())
        #expect(h.connection.isReady == true)
        #expect(h.connection.serverInfo?.security == "X509Vnc")
        #expect(h.connection.serverInfo?.veNCryptSubtypes == [261, 258, 2])
    }

    @Test func veNCryptVncAuthSubtypeGetsNoAcknowledgementByte() {
        // Xvnc's default (TLSVnc, VncAuth) before anonymous TLS: VncAuth chosen as a subtype. The
        // server's VncAuth starts at once with its challenge — TigerVNC acknowledges only TLS
        // subtypes — so the first byte after the choice belongs to the challenge.
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.x509Vnc, .vncAuth]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [2, 19, 2] + [0, 2] + [0] + [2, 0, 0, 1, 2, 0, 0, 0, 2])
        #expect(h.sent.last == [0, 0, 0, 2])
        let challenge = (1...16).map { UInt8($0) }
        h.feed(challenge)
        #expect(!h.actions.contains { if case .startTLS = $0 { return true } else { return false } })
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "secret12"))
        #expect(h.sent.last == VNCAuthentication.response(challenge: challenge, password: "secret12"))
        h.feed([0, 0, 0, 0] + serverInit())
        #expect(h.connection.isReady == true)
        #expect(h.connection.serverInfo?.security == "VncAuth")
    }

    @Test func veNCryptRSAAESSubtypeStartsTheKeyExchangeWithoutAcknowledgement() {
        // TigerVNC lists RA2 (5) among the VeNCrypt subtypes; chosen there, the server sends its
        // RSA key straight away.
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.x509Vnc, .ra2]
        var h = Harness(configuration: configuration)
        h.feed(Array("RFB 003.008\n".utf8) + [1, 19] + [0, 2] + [0] + [2, 0, 0, 1, 2, 0, 0, 0, 5])
        #expect(h.sent.last == [0, 0, 0, 5])
        h.feed([0, 0, 8, 0])    // the start of a 2048-bit key: the exchange is waiting for the rest
        #expect(h.closeError == nil)
        #expect(h.connection.chosenMethod == .ra2)
    }

    @Test func veNCryptWithNothingUsableAsksToReconnectWithoutIt() {
        // Top level offers VeNCrypt and VncAuth; VeNCrypt then offers only SASL: the client
        // cannot back out of VeNCrypt on this connection, so it asks for another without it…
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [2, 19, 2] + [0, 2] + [0] + [1, 0, 0, 1, 7])
        #expect(h.closeError == .veNCryptUnusable(subtypes: ["TLSSASL(263)"], fallback: ["VncAuth"]))
        // …where VncAuth is chosen at the top level.
        var configuration = RFBConnection.Configuration()
        configuration.avoidVeNCrypt = true
        var again = Harness(configuration: configuration)
        again.feed(Array("RFB 003.008\n".utf8) + [2, 19, 2])
        #expect(again.sent.last == [2])
        #expect(again.connection.chosenMethod == .vncAuth)
    }

    /// A server offering only anonymous TLS (TLSVnc inside VeNCrypt): on Linux the subtype is
    /// chosen and TLS starts after the server's acknowledgement (OpenSSL carries it); where no
    /// anonymous suites exist, the failure names the X509 alternative.
    @Test func anonymousTLSOnly() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [1, 19] + [0, 2] + [0] + [1, 0, 0, 1, 2])
        #if os(Linux)
        #expect(h.closeError == nil)
        #expect(h.sent.last == [0, 0, 1, 2], "TLSVnc chosen")
        h.feed([1])
        #expect(h.actions.contains { if case .startTLS = $0 { true } else { false } })
        #else
        guard case .noCommonSecurityType(_, _, let hint)? = h.closeError else {
            Issue.record("expected noCommonSecurityType, got \(String(describing: h.closeError))")
            return
        }
        #expect(hint?.contains("X509Vnc") == true)
        #expect(hint?.contains("anonymous") == true)
        #endif
    }

    /// The older TLS type (18, vino; x11vnc's ANONTLS): TLS starts right after the choice, with
    /// no acknowledgement byte; inside, the server lists types again and VNC Authentication runs
    /// as usual. A refusal inside TLS (count 0) carries its reason.
    @Test func theTLSType18StartsTLSAtOnceThenChoosesInside() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [2, 18, 2])
        #if os(Linux)
        #expect(h.sent.last == [18], "the TLS type comes before plain VncAuth")
        #expect(h.actions.contains { if case .startTLS = $0 { true } else { false } })
        h.actions += h.connection.provideCredentials(VNCCredentials(password: "secret12"))
        h.actions += h.connection.tlsEstablished()
        h.feed([2, 1, 2])                                    // inside: None, VncAuth
        #expect(h.sent.last == [2], "VNC Authentication chosen inside")
        let challenge = [UInt8](repeating: 0x5A, count: 16)
        h.feed(challenge)
        #expect(h.sent.last == VNCAuthentication.response(challenge: challenge, password: "secret12"))
        h.feed([0, 0, 0, 0] + serverInit())
        #expect(h.connection.isReady == true)
        #expect(h.connection.serverInfo?.security == "AnonTLS")
        #expect(h.connection.serverInfo?.usesAnonymousTLS == true)

        var refused = Harness()
        refused.feed(Array("RFB 003.008\n".utf8) + [1, 18])
        refused.actions += refused.connection.tlsEstablished()
        refused.feed([0, 0, 0, 0, 9] + Array("not today".utf8))
        #expect(refused.closeError == .serverRefused(reason: "not today"))
        #else
        #expect(h.sent.last == [2], "no anonymous TLS here: plain VncAuth")
        #endif
    }

    @Test func veNCryptPlainSendsUserAndPasswordWithLengths() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.plain]
        var h = Harness(configuration: configuration)
        // Plain is not a TLS subtype: no acknowledgement byte, the credentials go at once.
        h.feed(Array("RFB 003.008\n".utf8) + [1, 19] + [0, 2] + [0] + [1, 0, 0, 1, 0])
        #expect(h.actions.contains { if case .requestCredentials(let r) = $0 { return r.needsUsername } else { return false } })
        h.actions += h.connection.provideCredentials(VNCCredentials(username: "ann", password: "pässword"))
        var w = ByteWriter()
        w.writeInteger(UInt32(3)); w.writeInteger(UInt32("pässword".utf8.count)); w.writeUTF8("ann"); w.writeUTF8("pässword")
        #expect(h.sent.last == w.bytes)
    }

    @Test func veNCryptVersionTooOldIsRefused() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [1, 19] + [0, 1])
        guard case .protocolViolation(let text)? = h.closeError else {
            Issue.record("expected protocolViolation, got \(String(describing: h.closeError))")
            return
        }
        #expect(text.contains("0.1"))
    }

    @Test func bytesBeforeTLSAreAProtocolViolation() {
        var h = Harness()
        h.feed(Array("RFB 003.008\n".utf8) + [1, 19] + [0, 2] + [0] + [1, 0, 0, 1, 4] + [1, 0x16, 0x03])
        guard case .protocolViolation? = h.closeError else {
            Issue.record("expected protocolViolation, got \(String(describing: h.closeError))")
            return
        }
    }

    @Test func closeDuringHandshakeExplainsWhere() {
        var h = Harness()
        h.actions += h.connection.connectionClosed()
        #expect(h.closeError == .connectionClosed("before the server sent its RFB banner"))
    }
}
