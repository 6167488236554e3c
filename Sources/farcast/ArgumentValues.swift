import ArgumentParser
import Punktfunk
import RFB
import Sendspin
import Viewer

// Library values an option takes directly: parsed once by the argument parser (a bad value is a
// usage error naming the choices), never validated as text and parsed again with `!`.

extension ScaleMode: ExpressibleByArgument {}

extension ViewerCorner: ExpressibleByArgument {}

extension JPEGSubsampling: ExpressibleByArgument {}
extension SourceCodec: ExpressibleByArgument {}

extension RFBEncoding: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { decodable.map(\.name) }
}

extension StreamMode: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public var defaultValueDescription: String { description }
}

extension VideoCodec: ExpressibleByArgument {
    public init?(argument: String) { self.init(rawValue: argument.lowercased()) }
}

extension PixelFormat: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { ["rgb888", "rgb565", "bgr233", "map8"] }
}
