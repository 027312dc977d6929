import Foundation
import TokenCache

/// Test-helper commands for the EncryptedFile tests: name -> command taking the remaining arguments.
let encryptedFileCommands: [String: HelperCommand] = [:]
