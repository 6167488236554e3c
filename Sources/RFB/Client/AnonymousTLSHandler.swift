#if os(Linux)
import COpenSSL
import COpenSSLLoader
import NIOCore

/// TLS with anonymous Diffie-Hellman, as VeNCrypt's TLSNone/TLSVnc/TLSPlain subtypes use
/// (TigerVNC's default `TLSVnc`): encryption without certificates, so no server identity — it
/// protects against eavesdropping, not against a man in the middle. BoringSSL (swift-nio-ssl) has
/// no anonymous suites, so this handler runs OpenSSL 3's libssl over two memory BIOs: bytes from
/// the socket go into one, OpenSSL's output comes out of the other and is written to the socket.
/// TLS 1.2 at most (TLS 1.3 has no anonymous suites) and security level 0 (OpenSSL refuses
/// anonymous suites above it). Linux only; on Apple platforms the TLS* subtypes are not offered.
///
/// Invariants: touched only on its channel's event loop; `ssl` lives from handlerAdded to
/// handlerRemoved; application writes before the handshake completes wait in `pending`.
final class AnonymousTLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private var context: OpaquePointer?     // SSL_CTX
    private var ssl: OpaquePointer?         // SSL
    private var readBIO: OpaquePointer?     // socket → OpenSSL (owned by `ssl`)
    private var writeBIO: OpaquePointer?    // OpenSSL → socket (owned by `ssl`)
    private var handshakeDone = false
    private var failed = false
    private var pending: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)

    /// The cipher suite agreed, once the handshake is done (for logs and `info`).
    private(set) var cipher: String?

    func handlerAdded(context channelContext: ChannelHandlerContext) {
        if let problem = farcast_openssl_load() {
            return fail(channelContext, "anonymous TLS needs OpenSSL, which could not be loaded "
                        + "(\(String(cString: problem))); install it: apt install libssl3")
        }
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { return fail(channelContext, "cannot create an OpenSSL context") }
        context = ctx
        SSL_CTX_set_security_level(ctx, 0)
        _ = farcast_ssl_ctx_max_tls12(ctx)
        _ = farcast_ssl_ctx_min_tls10(ctx)
        guard SSL_CTX_set_cipher_list(ctx, "aNULL:!eNULL:@SECLEVEL=0") == 1 else {
            return fail(channelContext, "OpenSSL has no anonymous cipher suites here")
        }
        guard let s = SSL_new(ctx), let rbio = BIO_new(BIO_s_mem()), let wbio = BIO_new(BIO_s_mem()) else {
            return fail(channelContext, "cannot create an OpenSSL session")
        }
        SSL_set_bio(s, rbio, wbio)
        SSL_set_connect_state(s)
        ssl = s
        readBIO = rbio
        writeBIO = wbio
        if channelContext.channel.isActive { advanceHandshake(channelContext) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    func channelActive(context: ChannelHandlerContext) {
        advanceHandshake(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        for (_, promise) in pending { promise?.fail(ChannelError.ioOnClosedChannel) }
        pending = []
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed, let readBIO else { return }
        var buffer = unwrapInboundIn(data)
        while buffer.readableBytes > 0 {
            let written = buffer.withUnsafeReadableBytes { raw in BIO_write(readBIO, raw.baseAddress, Int32(raw.count)) }
            guard written > 0 else { return fail(context, "OpenSSL could not take the received bytes") }
            buffer.moveReaderIndex(forwardBy: Int(written))
        }
        if !handshakeDone {
            advanceHandshake(context)
            guard handshakeDone else { return }
        }
        readPlaintext(context)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        guard !failed else { promise?.fail(Failure(description: "the TLS session failed")); return }
        guard handshakeDone else {
            pending.append((buffer, promise))
            return
        }
        encrypt(context, buffer, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        context.flush()
    }

    /// Says goodbye properly (close_notify) before the socket closes, so the server does not log
    /// a truncated TLS session.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if handshakeDone, !failed, let ssl {
            _ = SSL_shutdown(ssl)
            drainWriteBIO(context, promise: nil)
        }
        context.close(mode: mode, promise: promise)
    }

    // MARK: -

    private func advanceHandshake(_ context: ChannelHandlerContext) {
        guard let ssl, !handshakeDone, !failed else { return }
        let result = SSL_do_handshake(ssl)
        drainWriteBIO(context, promise: nil)
        if result == 1 {
            handshakeDone = true
            cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) }
            let waiting = pending
            pending = []
            for (buffer, promise) in waiting { encrypt(context, buffer, promise: promise) }
            context.flush()
            // Bytes that arrived together with the server's last handshake message.
            readPlaintext(context)
            return
        }
        let code = SSL_get_error(ssl, result)
        if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE { return }
        // A handshake_failure alert before any server hello: nothing we offered was acceptable,
        // which for anonymous suites is a server whose OpenSSL refuses them.
        let errors = Self.errorQueue()
        let refused = SSL_get_current_cipher(ssl) == nil
            && errors.codes.contains { Int32($0 & 0x7FFFFF) == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE }
        var reason = "the anonymous TLS handshake failed (\(errors.text))"
        if refused { reason += Self.anonymousSuitesRefusedHint }
        fail(context, reason)
    }

    private func readPlaintext(_ context: ChannelHandlerContext) {
        guard let ssl else { return }
        var delivered = false
        while true {
            let n = scratch.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                var out = context.channel.allocator.buffer(capacity: Int(n))
                scratch.withUnsafeBytes { _ = out.writeBytes(UnsafeRawBufferPointer(rebasing: $0.prefix(Int(n)))) }
                context.fireChannelRead(wrapInboundOut(out))
                delivered = true
                continue
            }
            let code = SSL_get_error(ssl, n)
            if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE { break }
            if code == SSL_ERROR_ZERO_RETURN {
                // The server's close_notify: the end of the stream.
                context.close(promise: nil)
                break
            }
            return fail(context, "anonymous TLS failed while reading (\(Self.lastError()))")
        }
        drainWriteBIO(context, promise: nil)
        if delivered { context.fireChannelReadComplete() }
    }

    private func encrypt(_ context: ChannelHandlerContext, _ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard let ssl else { promise?.fail(ChannelError.ioOnClosedChannel); return }
        var ok = true
        buffer.withUnsafeReadableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = SSL_write(ssl, raw.baseAddress! + offset, Int32(raw.count - offset))
                guard n > 0 else { ok = false; return }
                offset += Int(n)
            }
        }
        guard ok else {
            promise?.fail(Failure(description: "anonymous TLS failed while writing (\(Self.lastError()))"))
            return fail(context, "anonymous TLS failed while writing (\(Self.lastError()))")
        }
        drainWriteBIO(context, promise: promise)
    }

    /// Writes what OpenSSL produced to the socket; `promise` completes with the last write.
    private func drainWriteBIO(_ context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard let writeBIO else { promise?.succeed(); return }
        var wrote = false
        while BIO_ctrl_pending(writeBIO) > 0 {
            let n = scratch.withUnsafeMutableBytes { BIO_read(writeBIO, $0.baseAddress, Int32($0.count)) }
            guard n > 0 else { break }
            var out = context.channel.allocator.buffer(capacity: Int(n))
            scratch.withUnsafeBytes { _ = out.writeBytes(UnsafeRawBufferPointer(rebasing: $0.prefix(Int(n)))) }
            let more = BIO_ctrl_pending(writeBIO) > 0
            context.write(wrapOutboundOut(out), promise: more ? nil : promise)
            wrote = true
        }
        if wrote { context.flush() } else { promise?.succeed() }
    }

    private func fail(_ context: ChannelHandlerContext, _ reason: String) {
        guard !failed else { return }
        failed = true
        let error = Failure(description: reason)
        for (_, promise) in pending { promise?.fail(error) }
        pending = []
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func release() {
        if let ssl { SSL_free(ssl) }     // frees both BIOs
        if let context { SSL_CTX_free(context) }
        ssl = nil
        context = nil
        readBIO = nil
        writeBIO = nil
    }

    /// Added to a handshake failure when the server refused every suite offered.
    private static let anonymousSuitesRefusedHint = """
        : the server accepted none of the anonymous cipher suites. x11vnc 0.9.16 on OpenSSL 3 \
        refuses them unless started with OPENSSL_CONF naming a configuration with \
        "CipherString = ALL:@SECLEVEL=0"; a server certificate and an X509 method (x509vnc, \
        x509none) avoid anonymous TLS altogether
        """

    /// OpenSSL's reasons for the last failure, without its file names.
    private static func lastError() -> String { errorQueue().text }

    /// OpenSSL's error queue, emptied: the codes, and their reasons as text. (The reason is the
    /// code's low 23 bits, ERR_GET_REASON.)
    private static func errorQueue() -> (codes: [UInt], text: String) {
        var codes: [UInt] = []
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            codes.append(code)
            if let reason = ERR_reason_error_string(code) { reasons.append(String(cString: reason)) }
        }
        return (codes, reasons.isEmpty ? "no reason given" : reasons.joined(separator: "; "))
    }
}
#endif
