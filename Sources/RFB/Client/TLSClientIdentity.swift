import NIOCore
import NIOSSL

/// A certificate and its private key that this client presents when a server asks for one in
/// the TLS handshake (VeNCrypt X509* with a server that verifies clients, QEMU's
/// `tls-creds-x509,verify-peer=on`, x11vnc `-sslverify`). Loaded and checked when made, so a
/// wrong file is refused before any connection.
public struct TLSClientIdentity: Sendable {
    public let certificateChain: [NIOSSLCertificate]
    public let privateKey: NIOSSLPrivateKey

    /// Reads a PEM certificate (chain, leaf first) and a PEM private key (unencrypted).
    public init(certificateFile: String, keyFile: String) throws(RFBError) {
        do {
            certificateChain = try NIOSSLCertificate.fromPEMFile(certificateFile)
        } catch {
            throw .tlsFailed("cannot read the client certificate \(certificateFile): \(Self.reason(error)) (a PEM file is expected)")
        }
        guard !certificateChain.isEmpty else { throw .tlsFailed("\(certificateFile) holds no PEM certificate") }
        do {
            privateKey = try NIOSSLPrivateKey(file: keyFile, format: .pem)
        } catch {
            throw .tlsFailed("cannot read the client key \(keyFile): \(Self.reason(error)) (an unencrypted PEM key is expected)")
        }
        // The key must belong to the certificate, or the server's check fails with a vague alert.
        let context: NIOSSLContext
        do {
            var probe = TLSConfiguration.makeServerConfiguration(certificateChain: certificateChain.map { .certificate($0) },
                                                                  privateKey: .privateKey(privateKey))
            probe.minimumTLSVersion = .tlsv12
            context = try NIOSSLContext(configuration: probe)
        } catch {
            throw .tlsFailed("the key \(keyFile) does not belong to the certificate \(certificateFile)")
        }
        _ = context
    }

    private static func reason(_ error: any Error) -> String {
        if let io = error as? IOError { return io.description.lowercased() }
        if case NIOSSLError.failedToLoadCertificate = error { return "not a certificate" }
        if case NIOSSLError.failedToLoadPrivateKey = error { return "not a private key" }
        return "\(error)"
    }
}
