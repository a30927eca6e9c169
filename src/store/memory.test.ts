import { storeContract } from './contract.ts'
import { memoryStore } from './memory.ts'

storeContract('memory', async () => memoryStore())
