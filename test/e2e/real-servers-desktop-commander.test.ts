/**
 * Every refusal names its fix (issue 29 point 6) with a real shell and file-manager server,
 * desktop-commander, under bubblewrap: test/support/desktop-commander.ts says what is checked.
 */
import { desktopCommanderSuite } from '../support/desktop-commander.ts'
import { MECHANISMS } from '../support/real-servers.ts'

if (MECHANISMS.includes('bubblewrap')) desktopCommanderSuite('bubblewrap')
