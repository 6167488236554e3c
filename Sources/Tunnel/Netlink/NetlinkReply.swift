/// Netlink answers parsed from a received datagram (pure). Every length is checked against what
/// arrived before it is used; a datagram that does not hold together is an error, never a crash.
public enum NetlinkReply {
    public enum Item: Equatable, Sendable {
        /// `NLMSG_ERROR` with error 0.
        case acknowledged(sequence: UInt32)
        /// `NLMSG_ERROR` with an errno (positive here) and the kernel's message and offset.
        case failed(sequence: UInt32, errno: Int32, message: String?, offset: UInt32?)
        /// `NLMSG_DONE`: the end of a dump.
        case done(sequence: UInt32)
        /// Any other message (a dump's entries), payload after the 16-byte header.
        case message(type: UInt16, flags: UInt16, sequence: UInt32, payload: [UInt8])
    }

    /// Parses every message in `datagram`.
    public static func parse(_ datagram: UnsafeRawBufferPointer) throws(NetlinkError.Reason) -> [Item] {
        var items: [Item] = []
        var offset = 0
        let total = datagram.count
        while offset + NetlinkMessage.headerSize <= total {
            let length = Int(datagram.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let type = datagram.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)
            let flags = datagram.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self)
            let sequence = datagram.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            guard length >= NetlinkMessage.headerSize, length <= total - offset else {
                throw .malformedReply("message length \(length) at offset \(offset) of a \(total)-byte datagram")
            }
            let payload = UnsafeRawBufferPointer(rebasing: datagram[(offset + NetlinkMessage.headerSize)..<(offset + length)])
            switch type {
            case NetlinkMessage.Kind.error:
                items.append(try parseError(payload, flags: flags, sequence: sequence))
            case NetlinkMessage.Kind.done:
                items.append(.done(sequence: sequence))
            default:
                items.append(.message(type: type, flags: flags, sequence: sequence, payload: Array(payload)))
            }
            offset += (length + 3) & ~3
        }
        if offset < total && total - offset >= 4 {
            throw .malformedReply("\(total - offset) stray bytes after the last message")
        }
        return items
    }

    private static func parseError(_ payload: UnsafeRawBufferPointer, flags: UInt16, sequence: UInt32) throws(NetlinkError.Reason) -> Item {
        guard payload.count >= 4 else { throw .malformedReply("error message of \(payload.count) bytes") }
        let code = payload.loadUnaligned(as: Int32.self)
        if code == 0 { return .acknowledged(sequence: sequence) }
        var message: String?
        var errorOffset: UInt32?
        if flags & NetlinkMessage.Flag.ackTLVs != 0, payload.count >= 4 + NetlinkMessage.headerSize {
            // After the errno: the request's header, its payload unless capped, then attributes.
            var tlv = 4 + NetlinkMessage.headerSize
            if flags & NetlinkMessage.Flag.capped == 0 {
                let requestLength = Int(payload.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                tlv = 4 + ((requestLength + 3) & ~3)
            }
            for (type, value) in attributes(payload, from: tlv) {
                switch type & 0x3fff {
                case NetlinkMessage.Attribute.errorMessage:
                    message = String(decoding: value.prefix { $0 != 0 }, as: UTF8.self)
                case NetlinkMessage.Attribute.errorOffset where value.count >= 4:
                    errorOffset = value.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
                default:
                    break
                }
            }
        }
        // The kernel sends -errno; a positive value would be a kernel bug, reported as is.
        return .failed(sequence: sequence, errno: code == Int32.min ? Int32.max : abs(code), message: message, offset: errorOffset)
    }

    /// The attributes (`rtattr`s) in `bytes` from `start`; stops at the first one that does not fit.
    public static func attributes(_ bytes: UnsafeRawBufferPointer, from start: Int) -> [(type: UInt16, value: [UInt8])] {
        var result: [(UInt16, [UInt8])] = []
        var offset = start
        while offset >= 0, offset + 4 <= bytes.count {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            let type = bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self)
            guard length >= 4, length <= bytes.count - offset else { break }
            result.append((type, Array(bytes[(offset + 4)..<(offset + length)])))
            offset += (length + 3) & ~3
        }
        return result
    }

    /// An interface address from an `RTM_NEWADDR` payload.
    public struct InterfaceAddress: Equatable, Sendable {
        public var interfaceIndex: Int32
        public var prefix: IPPrefix
    }

    /// Decodes an `RTM_NEWADDR` payload; nil when it is too short or has no usable address.
    public static func interfaceAddress(_ payload: [UInt8]) -> InterfaceAddress? {
        guard payload.count >= NetlinkMessage.addressHeaderSize else { return nil }
        return payload.withUnsafeBytes { raw -> InterfaceAddress? in
            let prefixLength = Int(raw[1])
            let index = raw.loadUnaligned(fromByteOffset: 4, as: Int32.self)
            var local: IPAddress?, address: IPAddress?
            for (type, value) in attributes(raw, from: NetlinkMessage.addressHeaderSize) {
                if type == NetlinkMessage.Attribute.addressLocal { local = IPAddress(bytes: value) }
                if type == NetlinkMessage.Attribute.addressAddress { address = IPAddress(bytes: value) }
            }
            guard let chosen = local ?? address, let prefix = try? IPPrefix(address: chosen, length: prefixLength) else { return nil }
            return InterfaceAddress(interfaceIndex: index, prefix: prefix)
        }
    }
}
