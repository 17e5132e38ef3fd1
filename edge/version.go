package edge

// Version is reported as the gateway's serverInfo.version.
const Version = "0.1.0"
