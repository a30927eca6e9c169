/**
 * Every refusal names its fix (issue 29 point 6) with a real shell and file-manager server,
 * desktop-commander, under node-permission: test/support/desktop-commander.ts says what is checked. The
 * fallback, the Node.js permission model, in a file of its own: the install and its package
 * copy take most of a file's time limit.
 */
import { desktopCommanderSuite } from '../support/desktop-commander.ts'
import { MECHANISMS } from '../support/real-servers.ts'

if (MECHANISMS.includes('node-permission')) desktopCommanderSuite('node-permission')
