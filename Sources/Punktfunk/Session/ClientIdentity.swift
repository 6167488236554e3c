import CNGTCP2
import Crypto
import FarcastSupport
import Foundation

/// The client's TLS identity: a self-signed ECDSA P-256 certificate (CN `punktfunk-client`) and
/// its key, created once and kept 0600 in the state directory, presented on every connect.
///
/// The host identifies this device by the SHA-256 of the certificate's DER (`fingerprint`).
public struct ClientIdentity: Sendable, Equatable {
    public static let certificateFile = "punktfunk/client-cert.pem"
    public static let keyFile = "punktfunk/client-key.pem"

    /// PEM text of the certificate.
    public let certificatePEM: [UInt8]
    /// PEM text of the private key (PKCS#8).
    public let keyPEM: [UInt8]
    /// DER of the certificate.
    public let certificateDER: [UInt8]

    /// SHA-256 of the certificate DER (32 raw bytes).
    public var fingerprint: [UInt8] { Array(SHA256.hash(data: certificateDER)) }
    /// The fingerprint as lowercase hex.
    public var fingerprintHex: String { hexString(fingerprint) }

    public init(certificatePEM: [UInt8], keyPEM: [UInt8]) throws(PunktfunkSessionError) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
        try QUICLibraries.load()
        self.certificateDER = try Self.derFromPEM(certificatePEM)
    }

    /// Loads the identity from the state directory, creating and saving it the first time.
    public static func loadOrCreate(in directory: StateDirectory) throws -> ClientIdentity {
        if let cert = try directory.read(certificateFile), let key = try directory.read(keyFile), !cert.isEmpty, !key.isEmpty {
            return try ClientIdentity(certificatePEM: cert, keyPEM: key)
        }
        let identity = try generate()
        // Key first: a crash between the writes leaves a key without a certificate, which the
        // next run overwrites, never a certificate without its key.
        try directory.write(identity.keyPEM, to: keyFile)
        try directory.write(identity.certificatePEM, to: certificateFile)
        return identity
    }

    /// Makes a fresh self-signed identity with GnuTLS.
    public static func generate(commonName: String = "punktfunk-client") throws(PunktfunkSessionError) -> ClientIdentity {
        try QUICLibraries.load()
        var key: gnutls_x509_privkey_t?
        var crt: gnutls_x509_crt_t?
        defer {
            if let key { gnutls_x509_privkey_deinit(key) }
            if let crt { gnutls_x509_crt_deinit(crt) }
        }
        func check(_ rc: Int32, _ what: String) throws(PunktfunkSessionError) {
            if rc < 0 { throw .tls("cannot create the client certificate (\(what)): \(String(cString: gnutls_strerror(rc)))") }
        }
        try check(gnutls_x509_privkey_init(&key), "key init")
        try check(gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, cngtcp2_gnutls_p256_bits(), 0), "key generation")
        try check(gnutls_x509_crt_init(&crt), "certificate init")
        try check(gnutls_x509_crt_set_version(crt, 3), "version")
        var serial = [UInt8](repeating: 0, count: 16)
        for i in serial.indices { serial[i] = UInt8.random(in: 0...255) }
        serial[0] &= 0x7F
        try check(gnutls_x509_crt_set_serial(crt, serial, serial.count), "serial")
        let now = time(nil)
        try check(gnutls_x509_crt_set_activation_time(crt, now - 86_400), "activation time")
        try check(gnutls_x509_crt_set_expiration_time(crt, now + 100 * 365 * 86_400), "expiration time")
        let cn = Array(commonName.utf8)
        try check(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, UInt32(cn.count)), "subject")
        try check(gnutls_x509_crt_set_issuer_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, UInt32(cn.count)), "issuer")
        try check(gnutls_x509_crt_set_key(crt, key), "public key")
        try check(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), "signature")
        let certPEM = try export { gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, $0) }
        let keyPEM = try export { gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, nil, UInt32(GNUTLS_PKCS_PLAIN.rawValue), $0) }
        return try ClientIdentity(certificatePEM: certPEM, keyPEM: keyPEM)
    }

    static func export(_ body: (UnsafeMutablePointer<gnutls_datum_t>) -> Int32) throws(PunktfunkSessionError) -> [UInt8] {
        var datum = gnutls_datum_t()
        let rc = body(&datum)
        guard rc >= 0, let data = datum.data else {
            throw .tls("cannot export the client certificate: \(String(cString: gnutls_strerror(rc)))")
        }
        defer { cngtcp2_gnutls_free(data) }
        return Array(UnsafeBufferPointer(start: data, count: Int(datum.size)))
    }

    static func derFromPEM(_ pem: [UInt8]) throws(PunktfunkSessionError) -> [UInt8] {
        var crt: gnutls_x509_crt_t?
        guard gnutls_x509_crt_init(&crt) >= 0, let crt else { throw .tls("cannot allocate a certificate") }
        defer { gnutls_x509_crt_deinit(crt) }
        let rc = pem.withUnsafeBufferPointer { buffer -> Int32 in
            var datum = gnutls_datum_t(data: UnsafeMutablePointer(mutating: buffer.baseAddress), size: UInt32(buffer.count))
            return gnutls_x509_crt_import(crt, &datum, GNUTLS_X509_FMT_PEM)
        }
        guard rc >= 0 else { throw .tls("the stored client certificate is not valid PEM (\(String(cString: gnutls_strerror(rc)))); delete it to make a new one") }
        return try export { gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_DER, $0) }
    }
}
