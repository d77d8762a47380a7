import { ANTHROPIC_IMAGE_TYPES, imageType } from '../../inference/dialects/inline-data'
import { UnsupportedRequestError } from './unsupported-request'

/** An image by value or by reference. */
export type AnthropicImageSource = { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string }

/**
 * A canonical image → Anthropic's image source: bytes as base64, a URL by reference, and a data
 * URL (which Anthropic's url source does not accept) decoded to base64.
 */
export function imageSource(mediaType: string, data: Uint8Array | URL): AnthropicImageSource {
  if (!(data instanceof URL)) return { type: 'base64', media_type: takenImageType(mediaType), data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64') }
  if (data.protocol !== 'data:') return { type: 'url', url: data.href }
  // data:[<media type>][;base64],<data>: Anthropic's url source does not accept data URLs.
  const comma = data.href.indexOf(',')
  const header = data.href.slice('data:'.length, comma)
  const payload = data.href.slice(comma + 1)
  const base64 = header.endsWith(';base64')
  const headerType = (base64 ? header.slice(0, -';base64'.length) : header).split(';')[0]
  return {
    type: 'base64',
    media_type: takenImageType(headerType !== undefined && headerType !== '' ? headerType : mediaType),
    data: base64 ? payload : percentDecodeBytes(payload).toString('base64'),
  }
}

/**
 * An inline image's type, refused before the call unless Anthropic takes it (QA: image/svg+xml, which
 * OpenAI-format clients may send, reached Anthropic, whose 400 no other backend of the model retries).
 */
function takenImageType(mediaType: string): string {
  const type = imageType(mediaType)
  if (ANTHROPIC_IMAGE_TYPES.has(type)) return type
  throw new UnsupportedRequestError(`an image of type ${mediaType.slice(0, 100)}: this model's Anthropic backend takes only image/jpeg, image/png, image/gif and image/webp`, 'messages')
}

/** A data URL's percent-encoded payload as raw bytes (not UTF-8 text: %FF is the byte 0xFF). */
function percentDecodeBytes(text: string): Buffer {
  const bytes: number[] = []
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index)
    if (code === 37 /* % */) {
      const hex = text.slice(index + 1, index + 3)
      if (!/^[0-9a-fA-F]{2}$/.test(hex)) throw new UnsupportedRequestError('An image data URL is not valid percent-encoding')
      bytes.push(Number.parseInt(hex, 16))
      index += 2
    } else if (code < 128) {
      bytes.push(code)
    } else {
      bytes.push(...Buffer.from(text[index]!, 'utf8'))
    }
  }
  return Buffer.from(bytes)
}
