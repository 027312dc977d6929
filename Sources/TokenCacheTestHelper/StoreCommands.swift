import Foundation
import TokenCache

/// Test-helper commands for the Store tests: name -> command taking the remaining arguments.
let storeCommands: [String: HelperCommand] = [:]
