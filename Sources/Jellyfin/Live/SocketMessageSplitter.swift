/// Cuts one WebSocket text message from `/socket` into the JSON objects it holds.
///
/// Normally a message is one `{"MessageType":…}` object, but the server's own tests replay two
/// other shapes: two objects back to back, and an object cut short. Each WebSocket message is
/// a unit, so a cut-short object is reported and dropped (never glued to the next message),
/// while the complete objects before it are still delivered. The scan is string- and
/// escape-aware and bounded in nesting; the message size is bounded by the socket's limit.
public enum SocketMessageSplitter {
    /// The objects found, in order, and what was wrong with the rest of the text, if anything.
    public struct Result: Sendable, Equatable {
        public var objects: [[UInt8]]
        public var problem: JellyfinSocketError?
    }

    public static let maxDepth = 64

    public static func split(_ text: String) -> Result {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { split(UnsafeBufferPointer($0)) }
    }

    public static func split(_ b: UnsafeBufferPointer<UInt8>) -> Result {
        var objects: [[UInt8]] = []
        var start = -1
        // The open brackets, innermost last (bounded by maxDepth), so `{ … ]` is caught.
        var open: [UInt8] = []
        open.reserveCapacity(maxDepth)
        var depth: Int { open.count }
        var inString = false
        var escaped = false
        for i in 0..<b.count {
            let c = b[i]
            if inString {
                if escaped { escaped = false } else if c == UInt8(ascii: "\\") { escaped = true } else if c == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch c {
            case UInt8(ascii: "\""):
                guard depth > 0 else { return Result(objects: objects, problem: .malformed("text outside a JSON object")) }
                inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 0 {
                    guard c == UInt8(ascii: "{") else { return Result(objects: objects, problem: .malformed("a message that is not a JSON object")) }
                    start = i
                }
                open.append(c)
                guard depth <= maxDepth else { return Result(objects: objects, problem: .malformed("objects nested deeper than \(maxDepth) levels")) }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard let opener = open.popLast(), (opener == UInt8(ascii: "{")) == (c == UInt8(ascii: "}")) else {
                    return Result(objects: objects, problem: .malformed("an unbalanced '\(Character(Unicode.Scalar(c)))'"))
                }
                if depth == 0 { objects.append(Array(b[start...i])) }
            case 0x20, 0x0A, 0x0D, 0x09:
                break
            default:
                if depth == 0 { return Result(objects: objects, problem: .malformed("text outside a JSON object")) }
            }
        }
        if depth > 0 || inString {
            return Result(objects: objects, problem: .truncated(b.count - start))
        }
        return Result(objects: objects, problem: nil)
    }
}

/// Why the live session could not read something the server sent, or lost its connection.
public enum JellyfinSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not JSON objects at all.
    case malformed(String)
    /// A message ended inside an object (the byte count of the unfinished object).
    case truncated(Int)
    /// An object that is not a session message (no `MessageType`, wrong field types).
    case undecodable(String)

    public var description: String {
        switch self {
        case .malformed(let why): return "the server sent a session message Farcast cannot read: \(why)"
        case .truncated(let count): return "the server sent a session message cut short (\(count) bytes without an end); dropped it"
        case .undecodable(let why): return "the server sent a session message Farcast cannot decode: \(why)"
        }
    }
}
