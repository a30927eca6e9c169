import { storeContract } from '../../test/contracts/store.ts'
import { memoryStore } from './memory.ts'

storeContract('memory', async () => memoryStore())
