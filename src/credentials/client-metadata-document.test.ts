import assert from 'node:assert/strict'
import { test } from 'node:test'
import { clientDocument, clientDocumentUrl } from './client-metadata-document.ts'

test('a document URL exists only under an https public URL, and never as a dot segment', () => {
  assert.equal(
    clientDocumentUrl('https://gw.example.com', 'drive'),
    'https://gw.example.com/oauth/client/drive',
  )
  assert.equal(clientDocumentUrl('http://127.0.0.1:8080', 'drive'), undefined)
  assert.equal(clientDocumentUrl('https://gw.example.com', '..'), undefined)
  assert.equal(
    clientDocumentUrl('https://gw.example.com/base', 'a b'),
    'https://gw.example.com/base/oauth/client/a%20b',
  )
})

test('the document names its own URL and a public client, with no secret', () => {
  const url = 'https://gw.example.com/oauth/client/drive'
  const doc = clientDocument(url, 'https://gw.example.com', 'https://gw.example.com/cb', [])
  assert.equal(doc.client_id, url)
  assert.equal(doc.token_endpoint_auth_method, 'none')
  assert.deepEqual(doc.redirect_uris, ['https://gw.example.com/cb'])
  assert.ok(!('scope' in doc))
  assert.ok(!Object.keys(doc).some((k) => k.startsWith('client_secret')))
  assert.equal(clientDocument(url, 'https://gw.example.com', 'x', ['a', 'b']).scope, 'a b')
})
