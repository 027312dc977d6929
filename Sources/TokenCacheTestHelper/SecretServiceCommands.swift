import Foundation
import TokenCache

/// Test-helper commands for the SecretService tests: name -> command taking the remaining arguments.
let secretServiceCommands: [String: HelperCommand] = [:]
