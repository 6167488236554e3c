/// Reads a `server/time` answer without Foundation's JSONDecoder. A player gets one every clock
/// exchange, several a second for as long as it plays, and the general path parses the envelope
/// twice (its type, then its payload) at a cost far above the message's: it was a tenth of the
/// event loop's CPU during playback.
///
/// The reader accepts only a document that is plainly a server/time envelope — one object with a
/// `type` of "server/time" and a `payload` object holding the three timestamps as integers, keys
/// in any order, JSON whitespace between tokens — and returns nil for anything else (an escape, a
/// number with a fraction or exponent, a leading zero, more than 18 digits, an unknown or repeated
/// key, trailing bytes). A nil sends the message the general way, which reads or rejects it with
/// its usual errors, so this can only be faster, never more permissive.
enum ServerTimeReader {
    static func read(_ bytes: [UInt8]) -> ServerTime? {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            return scanner.envelope()
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func envelope() -> ServerTime? {
            var sawType = false
            var time: ServerTime?
            guard take(UInt8(ascii: "{")) else { return nil }
            repeat {
                guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
                if key.elementsEqual("type".utf8) {
                    guard !sawType, let value = string(), value.elementsEqual("server/time".utf8) else { return nil }
                    sawType = true
                } else if key.elementsEqual("payload".utf8) {
                    guard time == nil, let payload = payload() else { return nil }
                    time = payload
                } else {
                    return nil
                }
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")), sawType, let time else { return nil }
            skipWhitespace()
            return index == bytes.count ? time : nil
        }

        private mutating func payload() -> ServerTime? {
            var clientTransmitted: Int64?, serverReceived: Int64?, serverTransmitted: Int64?
            guard take(UInt8(ascii: "{")) else { return nil }
            repeat {
                guard let key = string(), take(UInt8(ascii: ":")), let value = integer() else { return nil }
                if key.elementsEqual("client_transmitted".utf8), clientTransmitted == nil {
                    clientTransmitted = value
                } else if key.elementsEqual("server_received".utf8), serverReceived == nil {
                    serverReceived = value
                } else if key.elementsEqual("server_transmitted".utf8), serverTransmitted == nil {
                    serverTransmitted = value
                } else {
                    return nil
                }
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")), let clientTransmitted, let serverReceived, let serverTransmitted else { return nil }
            return ServerTime(clientTransmitted: clientTransmitted, serverReceived: serverReceived, serverTransmitted: serverTransmitted)
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Consumes `byte` after any whitespace; false (nothing consumed but the whitespace) if
        /// the next byte is another.
        private mutating func take(_ byte: UInt8) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string with no escapes and no control bytes; its bytes between the quotes.
        private mutating func string() -> UnsafeBufferPointer<UInt8>.SubSequence? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return bytes[start..<(index - 1)]
                }
                guard byte != UInt8(ascii: "\\"), byte >= 0x20 else { return nil }
                index += 1
            }
            return nil
        }

        /// An integer of 1–18 digits with an optional minus, no leading zero, no fraction or
        /// exponent (those go the general way), not −0.
        private mutating func integer() -> Int64? {
            skipWhitespace()
            let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            let start = index
            var value: Int64 = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
                index += 1
                guard index - start <= 18 else { return nil }
            }
            let digits = index - start
            guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")), !(negative && value == 0) else { return nil }
            if index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
                default: break
                }
            }
            return negative ? -value : value
        }
    }
}
