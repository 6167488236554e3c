import FarcastSupport

extension RFBConnection {
    /// ServerInit: the desktop's size, pixel format and name (and after the Tight security type,
    /// Tight's capability lists). The client answers with its pixel format, its encodings and a
    /// first full update request, and the session begins.
    mutating func readServerInit(_ reader: inout ByteReader, tightCapabilities: Bool, _ out: inout ConnectionOutput) throws {
        var r = reader
        let width = Int(try r.readInteger(as: UInt16.self))
        let height = Int(try r.readInteger(as: UInt16.self))
        let serverFormat = try PixelFormat.decode(from: &r)
        let nameLength = Int(try r.readInteger(as: UInt32.self))
        guard nameLength <= 1 << 20 else { throw RFBError.protocolViolation("desktop name of \(nameLength) bytes") }
        let name = try r.readUTF8(nameLength)
        if tightCapabilities {
            // Tight's interaction capabilities: the server-to-client and client-to-server
            // message types and the encodings it knows, 16 bytes each.
            let serverMessages = Int(try r.readInteger(as: UInt16.self))
            let clientMessages = Int(try r.readInteger(as: UInt16.self))
            let encodings = Int(try r.readInteger(as: UInt16.self))
            _ = try r.readInteger(as: UInt16.self)
            _ = try TightSecurityHandshake.readCapabilities(&r, count: serverMessages, what: "server message")
            _ = try TightSecurityHandshake.readCapabilities(&r, count: clientMessages, what: "client message")
            tightEncodingCapabilities = try TightSecurityHandshake.readCapabilities(&r, count: encodings, what: "encoding").map { $0.vendor + $0.name }
        }
        reader = r
        guard width <= Framebuffer.maximumDimension, height <= Framebuffer.maximumDimension else {
            throw RFBError.framebufferTooLarge(width: width, height: height)
        }
        try configuration.pixelFormat.validate()
        framebuffer = Framebuffer(width: width, height: height)
        screens = [RFBScreen(id: 0, x: 0, y: 0, width: width, height: height)]
        desktopName = name
        coverage = CoverageMap(width: width, height: height)
        let info = ServerInfo(banner: negotiation.banner, protocolVersion: "3.\(negotiation.minorVersion)", securityTypes: negotiation.offeredSecurityTypes,
                              veNCryptSubtypes: negotiation.offeredVeNCryptSubtypes, security: (negotiation.chosenMethod ?? .none).description,
                              width: width, height: height, name: name,
                              serverPixelFormat: serverFormat.description, pixelFormat: configuration.pixelFormat.description)
        serverInfo = info
        out.send(ClientMessage.setPixelFormat(configuration.pixelFormat).encoded())
        out.send(ClientMessage.setEncodings(encodingList()).encoded())
        out.send(ClientMessage.framebufferUpdateRequest(incremental: false, RFBRect(x: 0, y: 0, width: width, height: height)).encoded())
        state = .session
        out.append(.ready(info))
    }
}
